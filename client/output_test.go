package client_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// A duplicate answer says what the output is now; Send does not report
// success for one that is not as the command asked.
func TestSendChecksTheOutput(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	id := testenv.ID(t, "gw")
	run(t, fmt.Sprintf("id: %s\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		id, broker, filepath.Join(t.TempDir(), "fence.db")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitStatus(ctx, "online"); err != nil {
		t.Fatal(err)
	}
	on := fence.Command{ID: "b-1", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn}
	if res, err := c.Send(ctx, on); err != nil || res.Outcome != fence.Applied {
		t.Fatalf("Send(on) = %v, %v; want applied", res.Outcome, err)
	}
	if res, err := c.Send(ctx, on); err != nil || res.Outcome != fence.Duplicate || res.State != fence.StateOn {
		t.Fatalf("Send(on) again = %v %v, %v; want duplicate, on, no error", res.Outcome, res.State, err)
	}
	fenceOnly := fence.Command{ID: "b-2", Actuator: "pump", Fence: fence.Fence{Token: 43}}
	if _, err := c.Send(ctx, fenceOnly); err != nil {
		t.Fatalf("Send(fence only) = %v", err)
	}
	if _, err := c.Send(ctx, fence.Command{ID: "b-3", Actuator: "pump", Fence: fence.Fence{Token: 43, Seq: 1}, State: fence.StateOff}); err != nil {
		t.Fatalf("Send(off) = %v", err)
	}
	// The first command again (a resend after a lost answer): the gateway
	// had applied it, and its output has been switched off since.
	res, err := c.Send(ctx, on)
	var oe *client.OutputError
	if !errors.As(err, &oe) || res.Outcome != fence.Duplicate || res.State != fence.StateOff || oe.Asked != fence.StateOn {
		t.Fatalf("Send(on) after off = %+v, %v; want duplicate, state off, *OutputError asking on", res, err)
	}
	for _, want := range []string{"duplicate", "pump is off now, not on as asked", "higher seq"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("OutputError = %q, want it to contain %q", err, want)
		}
	}
	// A fence-only command asks for no state: its duplicate is success.
	if res, err := c.Send(ctx, fenceOnly); err != nil || res.Outcome != fence.Duplicate {
		t.Errorf("Send(fence only) again = %v, %v; want duplicate, no error", res.Outcome, err)
	}
}
