package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// AuthBroker is a Mosquitto that requires user names and passwords and
// applies an ACL.
type AuthBroker struct {
	URL string
	dir string
	cmd *exec.Cmd
}

// MosquittoAuth starts a real Mosquitto on a reserved loopback port (see Port) that
// allows no anonymous clients, knows users (name → password, through a
// password file made with mosquitto_passwd) and applies acl (Mosquitto's
// acl_file syntax). It is killed when t ends.
func MosquittoAuth(t testing.TB, users map[string]string, acl string) *AuthBroker {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	writePasswd(t, pw, users)
	b := &AuthBroker{dir: dir}
	b.WriteACL(t, acl)
	text := fmt.Sprintf("allow_anonymous false\npassword_file %s\nacl_file %s\nset_tcp_nodelay true\npersistence false\nmax_queued_messages %d\n",
		pw, filepath.Join(dir, "acl"), QueuedMessages)
	if os.Geteuid() == 0 {
		// Started as root, Mosquitto becomes user mosquitto, who cannot
		// read this test's files.
		text += "user root\n"
	}
	b.URL, b.cmd = mosquitto(t, text)
	return b
}

// WriteACL replaces the broker's ACL file; Reload makes it take effect.
func (b *AuthBroker) WriteACL(t testing.TB, acl string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(b.dir, "acl"), []byte(strings.TrimSpace(acl)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Reload makes Mosquitto read its password and ACL files again (SIGHUP).
func (b *AuthBroker) Reload(t testing.TB) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
