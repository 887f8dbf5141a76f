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

// MosquittoOn starts a real Mosquitto, as Mosquitto does, that also
// listens on each of hosts (addresses of this machine, such as a Netns
// link's HostAddr) on the same port. It returns the loopback URL and the
// URL on each host, in the order of hosts.
func MosquittoOn(t testing.TB, hosts ...string) (url string, on []string) {
	t.Helper()
	bin := Program(t, "mosquitto")
	ports := daemon(t, "mosquitto", 1, 10*time.Second, func(dir string, ports []int) *exec.Cmd {
		var conf strings.Builder
		fmt.Fprintf(&conf, "listener %d 127.0.0.1\n", ports[0])
		for _, h := range hosts {
			fmt.Fprintf(&conf, "listener %d %s\n", ports[0], h)
		}
		conf.WriteString("allow_anonymous true\nset_tcp_nodelay true\npersistence false\nmax_inflight_messages 100\n")
		path := filepath.Join(dir, "mosquitto.conf")
		if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command(bin, "-c", path)
	}, nil)
	for _, h := range hosts {
		on = append(on, fmt.Sprintf("tcp://%s:%d", h, ports[0]))
	}
	return fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]), on
}
