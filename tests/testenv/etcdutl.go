package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// etcdutlModule is the module, in the repository, that pins etcdutl.
const etcdutlModule = "tools/etcdutl"

// Etcdutl returns the path of an etcdutl whose snapshot restore has
// --bump-revision and --mark-compacted. It is the one on PATH if that one
// has them; otherwise it is built from the repository's tools/etcdutl
// module (the version pinned there, through the Go module proxy or the
// module cache) into the user's cache directory, once per version for
// every test process on the machine. If neither works, t skips (fails
// under CI) with the reason.
func Etcdutl(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("etcdutl"); err == nil {
		if out, _ := exec.Command(p, "snapshot", "restore", "--help").CombinedOutput(); strings.Contains(string(out), "--bump-revision") {
			return p
		}
	}
	goBin := Program(t, "go")
	gomod, err := exec.Command(goBin, "env", "GOMOD").Output()
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	Need(t, err == nil && filepath.IsAbs(root), "etcdutl is not installed and the repository to build it from was not found (go env GOMOD: %q, %v)", gomod, err)
	mod := filepath.Join(root, etcdutlModule)
	sum, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	Need(t, err == nil, "etcdutl is not installed and %s cannot be read: %v", mod, err)
	version := "unknown"
	for _, l := range strings.Split(string(sum), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "go.etcd.io/etcd/etcdutl/v3" {
			version = f[1]
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "fencegate-test", "etcdutl-"+version)
	bin := filepath.Join(dir, "etcdutl")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testenv: etcdutl: %v", err)
	}
	// One build at a time on this machine; the others wait for it.
	var unlock func()
	for deadline := time.Now().Add(5 * time.Minute); ; {
		u, ok, err := lockPort(filepath.Join(dir, "build.lock"))
		if err != nil {
			t.Fatalf("testenv: etcdutl: lock %s: %v", dir, err)
		}
		if ok {
			unlock = u
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: etcdutl: another process has been building %s for 5 minutes", bin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin // built while we waited
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	out, err := exec.Command(goBin, "build", "-C", mod, "-o", tmp, "go.etcd.io/etcd/etcdutl/v3").CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		Need(t, false, "etcdutl is not installed and cannot be built from %s (go build: %v): %s", mod, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatalf("testenv: etcdutl: %v", err)
	}
	return bin
}

// RestoreArgs returns the arguments of etcdutl snapshot restore (after the
// snapshot's path) that restore the member into data, a new data
// directory that the member can then be started on (see StartOn).
func (m *EtcdMember) RestoreArgs(data string) []string {
	return []string{"--data-dir", data, "--name", m.Name, "--initial-cluster", m.c.initialCluster(),
		"--initial-advertise-peer-urls", m.PeerURL, "--initial-cluster-token", m.c.token}
}
