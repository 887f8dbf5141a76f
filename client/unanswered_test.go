package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// A command that gets no answer says why it may not have come, as the
// Python and Node-RED clients do: the gateway is offline (its retained
// status), or has published no status at all.
func TestUnansweredSaysWhy(t *testing.T) {
	for _, c := range []struct {
		name, want string
		offline    bool
	}{
		{"offline", `gateway gw is offline (its status says so). After a crash the broker keeps`, true},
		{"no-status", `gateway gw has published no status: is the gateway id right`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			broker := testenv.EmbeddedBroker(t)
			if c.offline {
				gateway(t, broker)() // a clean stop: the retained status is offline
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "gw", Resend: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if c.offline {
				if err := cl.WaitStatus(ctx, "offline"); err != nil {
					t.Fatal(err)
				}
			}
			sctx, stop := context.WithTimeout(ctx, time.Second)
			defer stop()
			_, err = cl.Send(sctx, fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn})
			if !errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Send = %v; want ErrTimeout saying %q", err, c.want)
			}
		})
	}
}
