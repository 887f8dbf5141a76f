package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// TestReadersOfAHeldStorePointAtTheAPI: gateway inspect --store and gateway
// audit --store on a store that a running gateway holds said "give this
// gateway a store of its own", a writer's advice. They say to read the
// running gateway's API, at its address: a simulator's dashboard, or the
// http of the configuration next to the store.
func TestReadersOfAHeldStorePointAtTheAPI(t *testing.T) {
	simDir := t.TempDir()
	dash, _, _ := runningSimIn(t, simDir)
	latch := gatewayProc(t, testenv.EmbeddedBroker(t))
	for _, tt := range []struct{ name, store, api string }{
		{"a simulator", filepath.Join(simDir, "fence.db"), dash},
		{"a gateway", filepath.Join(filepath.Dir(latch), "fence.db"), "http://" + apiAddr(latch)},
	} {
		for _, cmd := range []string{"inspect", "audit"} {
			out, code := runCLI(t, cmd, "--store", tt.store)
			if code == 0 || !strings.Contains(out, "gateway audit --api "+tt.api+" ") || strings.Contains(out, "store of its own") {
				t.Errorf("gateway %s --store on %s's store: exit %d, want a failure that points at --api %s:\n%s", cmd, tt.name, code, tt.api, out)
			}
		}
	}
}
