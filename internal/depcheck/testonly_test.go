package depcheck

import (
	"strings"
	"testing"
)

// TestTestOnlyModules: modules that only the tests use are never linked
// into the gateway (with or without the simulator), so that neither the
// README's licence paragraph nor packaging/copyright has to name them.
func TestTestOnlyModules(t *testing.T) {
	testOnly := []string{
		"github.com/anishathalye/porcupine", // the history check of internal/torture (MIT)
	}
	for _, tags := range []string{"", "nosim"} {
		for _, d := range listDeps(t, nil, "-tags="+tags, mod+"cmd/gateway") {
			for _, m := range testOnly {
				if d == m || strings.HasPrefix(d, m+"/") {
					t.Errorf("the gateway (-tags=%q) links %s, which only tests may use", tags, d)
				}
			}
		}
	}
}
