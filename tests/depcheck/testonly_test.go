package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTestOnlyModules: modules that only the tests use are never linked
// into the gateway (with or without the simulator), so that neither the
// README's licence paragraph nor packaging/copyright has to name them.
func TestTestOnlyModules(t *testing.T) {
	testOnly := []string{
		"github.com/anishathalye/porcupine", // the history check of tests/torture (MIT)
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

// TestProductionLinksNoTestCode: no package outside tests/ links the
// testing package or the test harness (tests/...), so that the picture of
// the product's imports has no arrow into its tests and the gateway carries
// none of their code.
func TestProductionLinksNoTestCode(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s...: %v", mod, err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], mod) || strings.HasPrefix(f[0], mod+"tests/") {
			continue
		}
		checked++
		for _, imp := range f[1:] {
			if imp == "testing" || strings.HasPrefix(imp, mod+"tests/") {
				t.Errorf("%s imports %s: production code must not link test code; move what it needs out of tests/ or into a _test.go file", f[0], imp)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d production packages; want every package of the module (go list output:\n%s)", checked, out)
	}
}
