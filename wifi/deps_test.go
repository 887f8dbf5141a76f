package wifi

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly: the package that reads a file from the card,
// as root at boot, imports nothing outside Go's standard library.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/fencegate/fencegate/wifi" {
			t.Errorf("wifi imports %s, outside the standard library", p)
		}
	}
}
