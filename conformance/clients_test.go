package conformance_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// runClientTests runs a client's own test suite (argv in dir) against a
// gateway, its Mosquitto and an etcd, which it takes from the
// environment (see README.md), with extra variables added.
func runClientTests(t *testing.T, dir string, argv []string, extra ...string) {
	t.Helper()
	g := startGateway(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(g.env(), extra...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%v in %s, %v:\n%s", argv, dir, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
}

// The Python package's tests, with Debian's paho-mqtt (1.x on Debian 12)
// and with paho-mqtt 2, whose callback API differs.
func TestPython(t *testing.T) {
	t.Run("paho-debian", func(t *testing.T) {
		t.Parallel()
		runClientTests(t, "../python", []string{testenv.Python(t), "-m", "unittest", "discover", "-s", "tests", "-v"})
	})
	t.Run("paho-2", func(t *testing.T) {
		t.Parallel()
		path := paho2(t)
		v, err := exec.Command(testenv.Python(t), "-c", "import sys; sys.path.insert(0, sys.argv[1]); import paho.mqtt; print(paho.mqtt.__version__)", path).Output()
		if err != nil || !strings.HasPrefix(string(v), "2.") {
			t.Fatalf("paho-mqtt from %s is %q (%v), want 2.x", path, v, err)
		}
		runClientTests(t, "../python", []string{testenv.Python(t), "-m", "unittest", "discover", "-s", "tests", "-v"}, "PYTHONPATH="+path)
	})
}

// The Node-RED package's tests (mocha, in a Node-RED runtime).
func TestNodeRED(t *testing.T) {
	node(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not installed (apt-get install npm)")
	}
	runClientTests(t, "../node-red", []string{npm, "test", "--silent"})
}
