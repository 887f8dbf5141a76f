package conformance_test

import (
	"os"
	"os/exec"
	"testing"
	"time"
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
	if _, err := os.Stat("../python/fencegate"); err != nil {
		t.Skip("no Python package in this tree")
	}
	t.Run("paho-debian", func(t *testing.T) {
		t.Parallel()
		runClientTests(t, "../python", []string{python(t), "-m", "unittest", "discover", "-s", "tests", "-v"})
	})
	t.Run("paho-2", func(t *testing.T) {
		t.Parallel()
		runClientTests(t, "../python", []string{python(t), "-m", "unittest", "discover", "-s", "tests", "-v"}, "PYTHONPATH="+paho2(t))
	})
}

// The Node-RED package's tests (mocha, in a Node-RED runtime).
func TestNodeRED(t *testing.T) {
	if _, err := os.Stat("../node-red/package.json"); err != nil {
		t.Skip("no Node-RED package in this tree")
	}
	node(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not installed (apt-get install npm)")
	}
	runClientTests(t, "../node-red", []string{npm, "test", "--silent"})
}
