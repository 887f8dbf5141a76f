package conformance_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// A language is a client of the protocol: the command line of its
// conformance driver (see README.md).
type language struct {
	name   string
	driver func(t *testing.T) (cmd []string, dir string, env []string)
}

var languages = []language{
	{"go", func(t *testing.T) ([]string, string, []string) { return []string{bin.godriver}, "", nil }},
	{"python", func(t *testing.T) ([]string, string, []string) {
		return []string{testenv.Python(t), "-m", "fencegate", "send"}, "../python", nil
	}},
	{"node-red", func(t *testing.T) ([]string, string, []string) {
		return []string{node(t), "test/conformance-driver.js"}, "../node-red", nil
	}},
}

// paho2 returns the folder that holds paho-mqtt 2 (Debian's trixie
// package, unpacked by make clients), to put on PYTHONPATH.
func paho2(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FENCEGATE_PAHO2")
	if dir == "" {
		cache, _ := os.UserCacheDir()
		dir = filepath.Join(cache, "fencegate", "paho2", "usr", "lib", "python3", "dist-packages")
	}
	_, err := os.Stat(filepath.Join(dir, "paho", "mqtt", "enums.py")) // enums.py is new in paho-mqtt 2
	testenv.Need(t, err == nil, "paho-mqtt 2 is not unpacked at %s (make clients does it)", dir)
	return dir
}

// node returns Node.js, once the Node-RED package's dependencies are
// installed (npm ci in node-red/, as make clients does).
func node(t *testing.T) string {
	t.Helper()
	testenv.NodeRED(t, "..")
	return testenv.Program(t, "node")
}
