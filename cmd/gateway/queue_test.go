package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// brokerDocs are the docs with a recommended Mosquitto configuration.
var brokerDocs = []string{"protocol.md", "raspberry-pi-os.md", "security.md"}

// docsQueueLimit returns the max_queued_messages of the recommended
// Mosquitto configurations of the docs, which must all set it, to the
// same value.
func docsQueueLimit(t *testing.T) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^max_queued_messages (\d+)$`)
	limit := 0
	for _, name := range brokerDocs {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindAllSubmatch(b, -1)
		if len(m) != 1 {
			t.Fatalf("docs/%s sets max_queued_messages %d times in its broker configuration, want once", name, len(m))
		}
		n, _ := strconv.Atoi(string(m[0][1]))
		if limit != 0 && n != limit {
			t.Fatalf("docs/%s sets max_queued_messages %d, docs/%s %d: recommend one value", name, n, brokerDocs[0], limit)
		}
		limit = n
	}
	return limit
}

// TestQueuedCommandsSurviveRestart publishes 1,200 commands while the
// gateway is down, without resending any. With the broker configuration
// the docs recommend, the restarted gateway answers every one; with
// Mosquitto's default max_queued_messages (1000) the broker drops some,
// which is why the docs set it.
func TestQueuedCommandsSurviveRestart(t *testing.T) {
	const n = 1200
	limit := docsQueueLimit(t)
	if limit < 2*n {
		t.Fatalf("the docs' max_queued_messages %d is below twice this test's %d commands", limit, n)
	}
	for _, tc := range []struct {
		name string
		conf string
		lost bool // some commands are lost
	}{
		{"docs", fmt.Sprintf("max_queued_messages %d\n", limit), false},
		{"mosquitto default", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := testenv.MosquittoConf(t, "allow_anonymous true\nset_tcp_nodelay true\npersistence false\n"+tc.conf)
			cfg := writeConfig(t, t.TempDir(), broker, "")
			topics := wire.Topics{GatewayID: gatewayID(t)}
			answers := collectAnswers(t, broker, topics)
			ctl := testctl.Connect(t, broker, topics)
			p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
			ctl.WaitStatus(t, wire.StatusOnline)
			if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "first"), Actuator: "pump", Fence: fence.Fence{Token: 100}, State: fence.StateOn}); res.Outcome != fence.Applied {
				t.Fatalf("first command: %+v", res)
			}
			p.kill()
			ctl.WaitStatus(t, wire.StatusOffline)
			prefix := testenv.ID(t, "q") + "-"
			for i := range n {
				// Below the fence: answered stale, without a write.
				ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: fmt.Sprint(prefix, i), Actuator: "pump",
					Fence: fence.Fence{Token: 1, Seq: uint64(i)}, State: fence.StateOff}), false)
			}
			p = startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
			// Count from when it takes commands again: on a busy machine a
			// start alone can take longer than the quiet spell below (and
			// than testctl's 10 s: it failed once so, with two full suites
			// running beside it).
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := ctl.Client.WaitStatus(ctx, wire.StatusOnline); err != nil {
				t.Fatalf("the restarted gateway is not online: %v\n%s", err, p.output())
			}
			got, last := 0, time.Now()
			for got < n && time.Since(last) < 3*time.Second {
				time.Sleep(50 * time.Millisecond)
				if c := answers.count(prefix); c > got {
					got, last = c, time.Now()
				}
			}
			// And the gateway goes on taking new commands.
			if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "after"), Actuator: "pump", Fence: fence.Fence{Token: 101}, State: fence.StateOff}); res.Outcome != fence.Applied {
				t.Errorf("a new command after the queued ones: %+v, want applied", res)
			}
			switch {
			case !tc.lost && got < n:
				t.Errorf("%d of %d commands published while the gateway was down were answered: the broker dropped %d with max_queued_messages %d\n%s",
					got, n, n-got, limit, p.output())
			case tc.lost && got == n:
				t.Errorf("all %d commands published while the gateway was down were answered with Mosquitto's default max_queued_messages: "+
					"docs/protocol.md's reason to set it is out of date", n)
			default:
				t.Logf("%d of %d answered", got, n)
			}
		})
	}
}
