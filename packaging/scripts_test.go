package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// stubbed are the programs the maintainer scripts call. The tests run the
// scripts with PATH holding only stubs of them, which log their arguments
// and change nothing: a program a script calls without a stub is "not
// found" and fails the script, so nothing here can touch the machine.
var stubbed = []string{
	"getent", "groupadd", "adduser", "deluser", "delgroup", "userdel", "groupdel",
	"dpkg-statoverride", "install", "chown", "runuser",
	"systemctl", "deb-systemd-helper", "deb-systemd-invoke",
}

const stubScript = `#!/bin/sh
name=${0##*/}
echo "$name $*" >>"$STUB_LOG"
case "$name $1" in
"getent "*) exit "${STUB_GETENT:-0}" ;;          # 2: no such user or group
"dpkg-statoverride --list") exit "${STUB_STATOVERRIDE:-0}" ;; # 1: no override
"runuser "*) exit "${STUB_RUNUSER:-0}" ;;
esac
exit 0
`

type scriptRun struct {
	log, stdout, stderr string
}

// runScript runs packaging/debian/NAME with args under stubs; env adds
// STUB_* settings.
func runScript(t *testing.T, name string, env []string, args ...string) scriptRun {
	t.Helper()
	sh := testenv.Program(t, "sh")
	cat := testenv.Program(t, "cat") // the scripts' here-documents
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(dir, "stub")
	if err := os.WriteFile(stub, []byte(stubScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range stubbed {
		if err := os.Symlink(stub, filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(cat, filepath.Join(bin, "cat")); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command(sh, append([]string{filepath.Join(repoRoot(t), "packaging", "debian", name)}, args...)...)
	cmd.Env = append([]string{"PATH=" + bin, "STUB_LOG=" + log, "LC_ALL=C"}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	b, _ := os.ReadFile(log)
	return scriptRun{log: string(b), stdout: stdout.String(), stderr: stderr.String()}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func (r scriptRun) called(t *testing.T, call string, want bool) {
	t.Helper()
	got := false
	for _, l := range strings.Split(r.log, "\n") {
		if l == call {
			got = true
		}
	}
	if got != want {
		t.Errorf("called %q: %v, want %v; calls:\n%s", call, got, want, r.log)
	}
}

func (r scriptRun) calledPrefix(t *testing.T, prefix string, want bool) {
	t.Helper()
	got := false
	for _, l := range strings.Split(r.log, "\n") {
		if strings.HasPrefix(l, prefix) {
			got = true
		}
	}
	if got != want {
		t.Errorf("a call starting %q: %v, want %v; calls:\n%s", prefix, got, want, r.log)
	}
}

// The scripts test /run/systemd/system, /var/lib/fencegate and its store on
// the real machine (with the shell's built-in test, which changes nothing);
// expectations follow what is there.
var (
	systemdRunning = exists("/run/systemd/system")
	stateExists    = exists("/var/lib/fencegate")
	storeExists    = exists("/var/lib/fencegate/fence.db")
)

func TestPostinstFirstInstall(t *testing.T) {
	// No user, group or override yet.
	r := runScript(t, "postinst", []string{"STUB_GETENT=2", "STUB_STATOVERRIDE=1"}, "configure", "")
	r.called(t, "groupadd --system gpio", true)
	r.called(t, "adduser --system --group --home /var/lib/fencegate --no-create-home --gecos fencegate gateway fencegate", true)
	r.called(t, "adduser --quiet fencegate gpio", true)
	r.called(t, "dpkg-statoverride --update --add root fencegate 0640 /etc/fencegate/gateway.yaml", true)
	r.called(t, "install -d -m 0750 /var/lib/fencegate", !stateExists)
	r.called(t, "chown fencegate:fencegate /var/lib/fencegate", !storeExists)
	// The store is never created by the package: its floor is the
	// administrator's decision. The note says how to make it.
	r.calledPrefix(t, "runuser", false)
	for _, opt := range []string{"--floor-from-etcd", "--floor N", "--new"} {
		if !strings.Contains(r.stdout, "sudo -u fencegate gateway init --config /etc/fencegate/gateway.yaml "+opt) {
			t.Errorf("postinst does not show gateway init %s:\n%s", opt, r.stdout)
		}
	}
	r.called(t, "deb-systemd-helper enable fencegate.service", true)
	r.called(t, "systemctl --system daemon-reload", systemdRunning)
	// Enabled, never started: the configuration must be edited first.
	for _, l := range strings.Split(r.log, "\n") {
		if strings.Contains(l, "start") {
			t.Errorf("first install started something: %q", l)
		}
	}
	if !strings.Contains(r.stdout, "sudo systemctl start fencegate") {
		t.Errorf("postinst does not say how to start the gateway:\n%s", r.stdout)
	}
}

func TestPostinstUpgrade(t *testing.T) {
	// An upgrade (and a reinstall after remove): user, group and override
	// exist. The store is never created, the unit's enablement is the
	// administrator's, and a running gateway is restarted.
	r := runScript(t, "postinst", nil, "configure", "1.2.2")
	r.calledPrefix(t, "groupadd", false)
	r.calledPrefix(t, "adduser --system", false)
	r.calledPrefix(t, "dpkg-statoverride --update", false)
	r.calledPrefix(t, "runuser", false)
	r.calledPrefix(t, "deb-systemd-helper", false)
	r.called(t, "deb-systemd-invoke try-restart fencegate.service", systemdRunning)
	if strings.Contains(r.stdout, "not started") {
		t.Errorf("an upgrade printed the first-install note:\n%s", r.stdout)
	}
}

func TestPrerm(t *testing.T) {
	r := runScript(t, "prerm", nil, "remove")
	r.called(t, "deb-systemd-invoke stop fencegate.service", systemdRunning)
	r = runScript(t, "prerm", nil, "upgrade", "1.2.4")
	if r.log != "" {
		t.Errorf("prerm upgrade called %s; want nothing: the gateway runs on until postinst restarts it", r.log)
	}
}

func TestPostrm(t *testing.T) {
	r := runScript(t, "postrm", nil, "remove")
	for _, p := range []string{"deluser", "delgroup", "userdel", "groupdel", "chown", "dpkg-statoverride", "deb-systemd-helper"} {
		r.calledPrefix(t, p, false)
	}

	r = runScript(t, "postrm", nil, "purge")
	r.called(t, "deb-systemd-helper purge fencegate.service", true)
	r.called(t, "dpkg-statoverride --remove /etc/fencegate/gateway.yaml", true)
	r.called(t, "deluser --quiet --system fencegate", true)
	r.called(t, "delgroup --quiet --system --only-if-empty fencegate", true)
	// The store is kept, and handed to root so that no later user with
	// fencegate's old id owns it.
	r.called(t, "chown -R root:root /var/lib/fencegate", stateExists)

	// No script deletes anything of the state directory.
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "debian", s))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			for _, w := range f {
				if w == "rm" || w == "rmdir" || w == "unlink" || w == "find" || strings.Contains(w, "--init") {
					t.Errorf("%s:%d: %q: the scripts never delete or recreate the store", s, i+1, strings.TrimSpace(l))
				}
			}
		}
	}
}

func TestPostrmPurgeNote(t *testing.T) {
	if !stateExists {
		// The note is printed when the directory is there; check its text.
		b, _ := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "debian", "postrm"))
		if !strings.Contains(string(b), "kept $STATE and the fence store") {
			t.Errorf("postrm lacks the note that the store was kept")
		}
		return
	}
	r := runScript(t, "postrm", nil, "purge")
	if !strings.Contains(r.stderr, "kept /var/lib/fencegate") {
		t.Errorf("purge does not say the store was kept:\n%s", r.stderr)
	}
}
