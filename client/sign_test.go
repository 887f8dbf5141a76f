package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestSigningClient: a client with Options.Signer and Key signs every
// command, fence-only ones and those without an id included, and a
// gateway that requires signed commands applies them; the same client
// without a key is refused.
func TestSigningClient(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	key := ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize)))
	run(t, fmt.Sprintf("id: gw-signed\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\n"+
		"require_signature: true\ncontrollers:\n  - {name: ctl-a, public_key: %q, scopes: [pump]}\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		broker, filepath.Join(t.TempDir(), "fence.db"), sign.FormatPublicKey(key.Public().(ed25519.PublicKey))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, o := range []client.Options{{Signer: "ctl-a"}, {Key: key}, {Signer: "ctl-a", Key: key[:32]}} {
		o.Broker, o.GatewayID = broker, "gw-signed"
		if c, err := client.Dial(ctx, o); err == nil {
			c.Close()
			t.Errorf("Dial with Signer %q and a key of %d bytes succeeded, want an error", o.Signer, len(o.Key))
		}
	}
	signing, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw-signed", Signer: "ctl-a", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer signing.Close()
	if _, err := signing.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 5}}); err != nil {
		t.Errorf("signed fence-only command without an id: %v, want applied", err)
	}
	if res, err := signing.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 5, Seq: 1}, State: fence.StateOn, Holder: "ctl-a"}); err != nil || res.State != fence.StateOn {
		t.Errorf("signed on: %+v, %v, want applied", res, err)
	}

	plain, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw-signed"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	res, err := plain.Send(ctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 6}, State: fence.StateOff})
	var re *client.RejectedError
	if !errors.As(err, &re) || res.Reason != fence.ReasonUnsigned || res.State != fence.StateOn {
		t.Errorf("unsigned command: %+v, %v; want rejected unsigned, the pump still on", res, err)
	}
}
