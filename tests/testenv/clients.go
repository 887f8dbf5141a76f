package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Python returns a python3 that has paho-mqtt and cryptography, which the
// Python package (python/) needs: Debian's (python3-paho-mqtt), which a
// python3 earlier on PATH (a pyenv one, say) may shadow, or else the first
// on PATH. It skips t (fails it under CI) if neither has them.
func Python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import paho.mqtt.client, cryptography").Run() == nil {
			return p
		}
	}
	Need(t, false, "no python3 with paho-mqtt and cryptography (apt-get install python3-paho-mqtt python3-cryptography)")
	return ""
}

// NodeRED returns the folder of the node-red program that the Node-RED
// package's dependencies installed (make clients: npm ci in node-red/),
// repo being the repository's root. It skips t (fails it under CI) if
// Node.js or those dependencies are missing.
func NodeRED(t testing.TB, repo string) string {
	t.Helper()
	Program(t, "node")
	bin := filepath.Join(repo, "node-red", "node_modules", ".bin")
	_, err := os.Stat(filepath.Join(bin, "node-red"))
	Need(t, err == nil, "the Node-RED package's dependencies are not installed (make clients, or cd node-red && npm ci)")
	return bin
}
