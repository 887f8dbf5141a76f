package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runBinary runs the gateway binary bin with args and returns its output
// (stdout and stderr together) and exit status. A command that is still
// running after 20s (a simulator that started) is killed and fails the test.
func runBinary(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir()) // where a simulator that started would write
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gateway %q still running after 20s; killed. Output:\n%s", args, out.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// TestNosimCLI: the gateway built with -tags nosim (the Raspberry Pi build
// of make dist and make deb) answers gateway sim and gateway sim scenario
// with exit 64 and how to run the simulator instead, whatever their flags;
// -h prints a usage that says so and exits 0; the top-level usage marks sim
// as not in this build; and the binary links no embedded broker. The
// default build (TestMain's) keeps the simulator.
func TestNosimCLI(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-tags", "nosim", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nosim: %v\n%s", err, out)
	}
	const noSim = "gateway: this build has no simulator: it is the Raspberry Pi build; run the simulator from source with `make sim` or a build without -tags nosim\n"
	const about = "built without the simulator (-tags nosim)"
	tests := []struct {
		args []string
		code int
		want string // the whole output for errors, a part of it for usages
	}{
		{[]string{"sim"}, exitUsage, noSim},
		{[]string{"sim", "--mqtt", "127.0.0.1:1884", "--dir", t.TempDir()}, exitUsage, noSim},
		{[]string{"sim", "--bogus"}, exitUsage, noSim},
		{[]string{"sim", "scenario", "paused-controller"}, exitUsage, noSim},
		{[]string{"sim", "--", "-h"}, exitUsage, noSim},
		{[]string{"sim", "-h"}, 0, "Usage:\n  gateway sim (not in this build)\n"},
		{[]string{"sim", "--help"}, 0, about},
		{[]string{"sim", "--dir", "x", "-help"}, 0, about},
		{[]string{"sim", "scenario", "-h"}, 0, "Usage:\n  gateway sim scenario (not in this build)\n"},
		{[]string{"sim", "scenario", "paused-controller", "-h"}, 0, about},
		{[]string{"help", "sim"}, 0, about},
		{[]string{"help"}, 0, "  gateway sim                          not in this build (the Raspberry Pi build): see gateway sim -h\n"},
		{[]string{"version"}, 0, "fencegate gateway "},
	}
	for _, tt := range tests {
		out, code := runBinary(t, bin, tt.args...)
		ok := strings.Contains(out, tt.want)
		if tt.code != 0 {
			ok = out == tt.want
		}
		if code != tt.code || !ok {
			t.Errorf("nosim gateway %q: exit %d, output:\n%s\nwant exit %d and %q", tt.args, code, out, tt.code, tt.want)
		}
	}
	if out, _ := runBinary(t, bin, "help"); strings.Contains(out, "scenario") || strings.Contains(out, "embedded broker") {
		t.Errorf("nosim gateway help advertises the simulator:\n%s", out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/mochi-mqtt/server") {
			t.Errorf("the nosim gateway links %s, the embedded broker", d.Path)
		}
	}

	// The default build has the simulator: its usage and its help.
	if out, code := runBinary(t, binary, "sim", "-h"); code != 0 || !strings.Contains(out, "-mqtt") || strings.Contains(out, about) {
		t.Errorf("gateway sim -h: exit %d, output:\n%s\nwant exit 0 and the simulator's flags", code, out)
	}
	if out, code := runBinary(t, binary, "help"); code != 0 || !strings.Contains(out, "gateway sim scenario NAME") || strings.Contains(out, "not in this build") {
		t.Errorf("gateway help: exit %d, output:\n%s\nwant exit 0 and the simulator's commands", code, out)
	}
}
