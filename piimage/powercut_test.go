//go:build imagetest && linux

package piimage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// powerCuts cuts the Pi's power n times while a controller on the host
// sends it commands, and boots it again after each. After every cut: the
// gateway starts (its store opens), no fence is behind a command that was
// answered applied, and the kernel's GPIO line is at the recorded state.
func powerCuts(ctx context.Context, t *testing.T, pi *pi, ctlp **controllerConn, password string, n int) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FENCEGATE_IMAGE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("power cuts: %d, seed %d (FENCEGATE_IMAGE_SEED replays the cut times)", n, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	var regressions int
	start := time.Now()
	for i := 1; i <= n; i++ {
		ctl := *ctlp
		next := pi.actuators()["pump"].Fence.Token + 1

		// The controller sends on, off, on... each with a new token, one at
		// a time, and notes the highest token answered applied.
		var mu sync.Mutex
		var applied uint64
		sent := 0
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for tok := next; sctx.Err() == nil; tok++ {
				s := fence.StateOn
				if tok%2 == 0 {
					s = fence.StateOff
				}
				r, err := ctl.cl.Send(sctx, fence.Command{ID: fmt.Sprintf("cut-%d-%d", i, tok), Holder: "image-test", Actuator: "pump",
					Fence: fence.Fence{Token: tok}, State: s})
				if err == nil && r.Outcome == fence.Applied {
					mu.Lock()
					applied, sent = tok, sent+1
					mu.Unlock()
				}
			}
		}()
		// Cut once commands flow, at a random moment: mid-commit, mid-drive,
		// between commands.
		for {
			mu.Lock()
			n := sent
			mu.Unlock()
			if n > 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("no command was applied before the power cut")
			case <-time.After(10 * time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.Int64N(int64(4 * time.Second))))
		pi.kill()
		stop()
		<-done
		ctl.close()
		mu.Lock()
		last, count := applied, sent
		mu.Unlock()

		pi.boot(ctx)
		st := pi.waitFor(ctx, "systemctl is-active fencegate; systemctl show fencegate -p NRestarts", regexpActive)
		pi.tunnel(ctx)
		a := pi.actuators()["pump"]
		line := pi.gpio("GPIO17")
		want := map[string]string{"on": "out lo", "off": "out hi"}[a.State]
		t.Logf("cut %d: %d applied, the last token %d; after boot fence %d, %s, line %s (%s)", i, count, last, a.Fence.Token, a.State, line, firstLine(st))
		if a.Fence.Token < last {
			regressions++
			t.Errorf("cut %d: the fence went back: %d, but token %d was answered applied", i, a.Fence.Token, last)
		}
		if line != want {
			t.Errorf("cut %d: the pump is recorded %s, and its line is %s; want %s", i, a.State, line, want)
		}
		// The boot partition was mounted when the power went: its check ran.
		if j := pi.must("journalctl -b -o cat -u fencegate-fatcheck"); !strings.Contains(j, "not unmounted cleanly: checking it") {
			t.Errorf("cut %d: the boot partition was not checked after the power cut; its check's journal:\n%s", i, j)
		}
		*ctlp = dialController(ctx, t, pi, password)
		if t.Failed() {
			return
		}
	}
	t.Logf("power cuts: %d cycles in %v, %d fence regressions", n, time.Since(start).Round(time.Second), regressions)
}
