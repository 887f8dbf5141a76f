package conformance_test

import (
	"os"
	"os/exec"
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
		return []string{python(t), "-m", "fencegate", "send"}, "../python", nil
	}},
	{"node-red", func(t *testing.T) ([]string, string, []string) {
		return []string{node(t), "test/conformance-driver.js"}, "../node-red", nil
	}},
}

// python returns a Python 3 that has the package's dependencies (Debian's
// python3-paho-mqtt and python3-cryptography): Debian's own first, since
// another python3 earlier on PATH (pyenv's, say) lacks them.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import paho.mqtt.client, cryptography").Run() == nil {
			return p
		}
	}
	testenv.Need(t, false, "no python3 with paho-mqtt and cryptography (apt-get install python3-paho-mqtt python3-cryptography)")
	return ""
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
	p, err := exec.LookPath("node")
	testenv.Need(t, err == nil, "node is not installed (apt-get install nodejs npm)")
	_, err = os.Stat("../node-red/node_modules/node-red-node-test-helper")
	testenv.Need(t, err == nil, "the Node-RED package's dependencies are not installed (make clients, or cd node-red && npm ci)")
	return p
}
