package testenv

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EtcdCluster is a real etcd cluster of several members on loopback, each a
// process of its own with its data in a temporary directory, on ports
// reserved with Port and held until the test ends (so a member killed and
// started again gets its ports back). Members can be killed (SIGKILL),
// stopped (SIGSTOP) and started again, to test what clients see when the
// leader dies.
type EtcdCluster struct {
	Members []*EtcdMember
	t       testing.TB
	bin     string
	token   string   // --initial-cluster-token: unique to the run
	hosts   []string // more addresses the members take clients on
}

// EtcdMember is one member of an EtcdCluster.
type EtcdMember struct {
	Name      string
	ClientURL string
	PeerURL   string
	Dir       string // the member's directory: its logs, and its data in Dir/data unless StartOn says otherwise

	data    string
	c       *EtcdCluster
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	starts  int
}

// etcdClusterTries bounds how often StartEtcdCluster starts a cluster again
// on new ports when a member's port was taken by a program that does not
// use Port.
const etcdClusterTries = 3

// StartEtcdCluster starts an etcd cluster of n members on reserved loopback
// ports and returns it once every member listens on its ports (checked to
// be that member's, see Listens) and reports itself healthy (it has a
// leader). The members are killed when t ends.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return StartEtcdClusterOn(t, n)
}

// StartEtcdClusterOn is StartEtcdCluster with members that also take
// clients on each of hosts (addresses of this machine, such as a Netns
// link's HostAddr), on their client port: see ClientURLOn.
func StartEtcdClusterOn(t testing.TB, n int, hosts ...string) *EtcdCluster {
	t.Helper()
	bin := Program(t, "etcd")
	for try := 1; ; try++ {
		c := &EtcdCluster{t: t, bin: bin, token: ID(t, "etcd"), hosts: hosts}
		for i := range n {
			m := &EtcdMember{Name: fmt.Sprintf("m%d", i), c: c, Dir: t.TempDir()}
			m.data = filepath.Join(m.Dir, "data")
			m.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", Port(t))
			m.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", Port(t))
			c.Members = append(c.Members, m)
		}
		for _, m := range c.Members {
			m.start()
		}
		inUse := false
		for _, m := range c.Members {
			if err := m.waitListening(20 * time.Second); err != nil {
				if strings.Contains(strings.ToLower(err.Error()), "address already in use") && try < etcdClusterTries {
					inUse = true
					break
				}
				t.Fatalf("testenv: etcd cluster: %v", err)
			}
		}
		if inUse {
			t.Logf("testenv: an etcd member could not listen on its port (taken by a program that does not use testenv.Port); starting the cluster again on new ports")
			for _, m := range c.Members {
				m.Kill()
			}
			continue
		}
		c.WaitHealthy(30 * time.Second)
		return c
	}
}

// Endpoints returns the client URLs of every member, comma-separated, as
// gateway send --etcd and the example controller take them.
func (c *EtcdCluster) Endpoints() string {
	urls := make([]string, len(c.Members))
	for i, m := range c.Members {
		urls[i] = m.ClientURL
	}
	return strings.Join(urls, ",")
}

// WaitHealthy waits up to d until every running member reports itself
// healthy, and fails the test with the members' logs if they do not.
func (c *EtcdCluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		for !etcdHealthy(m.ClientURL) {
			if time.Now().After(deadline) {
				c.t.Fatalf("testenv: etcd member %s (%s) not healthy within %v:\n%s", m.Name, m.ClientURL, d, c.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Leader waits up to d until exactly one running member says it is the
// leader and every other running member is healthy (has a leader), and
// returns it. It fails the test if there is none within d.
func (c *EtcdCluster) Leader(d time.Duration) *EtcdMember {
	c.t.Helper()
	m, err := c.waitLeader(d, nil)
	if err != nil {
		c.t.Fatalf("testenv: %v:\n%s", err, c.logs())
	}
	return m
}

// Failover kills the leader with SIGKILL and waits up to d until the other
// members elected a new one. It returns the killed member (start it again
// with Start) and how long the cluster had no leader: from the kill until
// a surviving member said it leads.
func (c *EtcdCluster) Failover(d time.Duration) (killed *EtcdMember, took time.Duration) {
	c.t.Helper()
	old := c.Leader(d)
	start := time.Now()
	old.Kill()
	if _, err := c.waitLeader(d, old); err != nil {
		c.t.Fatalf("testenv: after killing the leader %s: %v:\n%s", old.Name, err, c.logs())
	}
	return old, time.Since(start)
}

// waitLeader waits for a leader other than not among the running members.
func (c *EtcdCluster) waitLeader(d time.Duration, not *EtcdMember) (*EtcdMember, error) {
	deadline := time.Now().Add(d)
	for {
		var leaders []*EtcdMember
		healthy := true
		for _, m := range c.Members {
			if !m.Running() {
				continue
			}
			lead, ok := etcdIsLeader(m.ClientURL)
			healthy = healthy && ok
			if lead {
				leaders = append(leaders, m)
			}
		}
		if len(leaders) == 1 && leaders[0] != not && healthy {
			return leaders[0], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("etcd cluster: no single leader within %v (leaders: %d)", d, len(leaders))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// initialCluster is the cluster's --initial-cluster.
func (c *EtcdCluster) initialCluster() string {
	var initial []string
	for _, m := range c.Members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	return strings.Join(initial, ",")
}

// logs returns the tail of every member's log.
func (c *EtcdCluster) logs() string {
	var b strings.Builder
	for _, m := range c.Members {
		log, _ := os.ReadFile(m.logPath)
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", m.Name, m.ClientURL, strings.Join(lines, "\n"))
	}
	return b.String()
}

// start starts the member's process on its data directory (a member
// started again finds its cluster there, and etcd ignores the
// --initial-cluster flags).
func (m *EtcdMember) start() {
	c := m.c
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts++
	m.logPath = filepath.Join(m.Dir, fmt.Sprintf("etcd-%d.log", m.starts))
	logf, err := os.Create(m.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	listen := []string{m.ClientURL}
	for _, h := range c.hosts {
		listen = append(listen, m.ClientURLOn(h))
	}
	cmd := exec.Command(c.bin, "--name", m.Name, "--data-dir", m.data,
		"--listen-client-urls", strings.Join(listen, ","), "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", c.initialCluster(), "--initial-cluster-token", c.token, "--initial-cluster-state", "new")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := startChild(cmd); err != nil {
		logf.Close()
		c.t.Fatalf("testenv: start etcd member %s: %v", m.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	m.cmd, m.exited = cmd, exited
	c.t.Cleanup(func() {
		Resume(cmd.Process)
		cmd.Process.Kill()
		<-exited
	})
}

// waitListening waits up to d until the member's process listens on its
// client and peer ports; it returns the log if the process exited.
func (m *EtcdMember) waitListening(d time.Duration) error {
	m.mu.Lock()
	cmd, exited, logPath := m.cmd, m.exited, m.logPath
	m.mu.Unlock()
	deadline := time.Now().Add(d)
	for !Listens(cmd.Process.Pid, strings.TrimPrefix(m.ClientURL, "http://")) || !Listens(cmd.Process.Pid, strings.TrimPrefix(m.PeerURL, "http://")) {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("member %s exited at start: %s", m.Name, strings.TrimSpace(string(log)))
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("member %s (pid %d) not listening on %s and %s within %v: %s", m.Name, cmd.Process.Pid, m.ClientURL, m.PeerURL, d, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Running reports whether the member's process runs (it may be stopped).
func (m *EtcdMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Kill kills the member with SIGKILL and waits until it is gone.
func (m *EtcdMember) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Start starts a killed member again, with its data directory and ports,
// and waits until it listens and is healthy (it rejoined the cluster).
func (m *EtcdMember) Start() {
	m.c.t.Helper()
	m.StartOn(m.data)
}

// StartOn starts a killed member again on the data directory data (one
// that etcdutl snapshot restore made with RestoreArgs, say), with its
// ports, and waits until it listens and is healthy.
func (m *EtcdMember) StartOn(data string) {
	m.c.t.Helper()
	if m.Running() {
		m.c.t.Fatalf("testenv: etcd member %s is running", m.Name)
	}
	m.mu.Lock()
	m.data = data
	m.mu.Unlock()
	m.start()
	if err := m.waitListening(20 * time.Second); err != nil {
		m.c.t.Fatalf("testenv: etcd cluster: %v", err)
	}
	m.c.WaitHealthy(30 * time.Second)
}

// ClientURLOn returns the member's client URL on host, one of the hosts
// of StartEtcdClusterOn.
func (m *EtcdMember) ClientURLOn(host string) string {
	return "http://" + host + m.ClientURL[strings.LastIndexByte(m.ClientURL, ':'):]
}

// Pid returns the member's process id (0 if it never started).
func (m *EtcdMember) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// etcdHealthy reports whether the etcd at url answers /health with true.
func etcdHealthy(url string) bool {
	body, err := httpGet(url + "/health")
	return err == nil && strings.Contains(body, `"true"`)
}

// etcdIsLeader reports whether the etcd at url is the leader (its
// etcd_server_is_leader metric) and whether it has a leader at all.
func etcdIsLeader(url string) (leader, hasLeader bool) {
	body, err := httpGet(url + "/metrics")
	if err != nil {
		return false, false
	}
	for _, l := range strings.Split(body, "\n") {
		switch strings.TrimSpace(l) {
		case "etcd_server_is_leader 1":
			leader = true
		case "etcd_server_has_leader 1":
			hasLeader = true
		}
	}
	return leader, hasLeader
}

// httpClient bounds every probe: a stopped member must not hang a test.
var httpClient = &http.Client{Timeout: 2 * time.Second}

func httpGet(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
