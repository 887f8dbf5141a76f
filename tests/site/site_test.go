package site

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// actuators are every gateway's outputs (sim board): the pump in a scope
// of its own, the fan and the heater sharing scope climate.
var actuators = []struct{ name, scope, pin string }{
	{"pump", "pump", "GPIO17"}, {"fan", "climate", "GPIO22"}, {"heater", "climate", "GPIO23"},
}

const (
	// answerWait is how long a controller waits for an answer before it
	// gives up on a command (Send publishes it again after 1 s).
	answerWait = 2 * time.Second
	// pace is the pause between two commands of a controller.
	pace = 20 * time.Millisecond
	// linkWait bounds a bridge's reconnection once the way to the site
	// is open again: restart_timeout 2 30 waits at most 30 s between
	// attempts.
	linkWait = 40 * time.Second
	// convergeWait bounds how long the site's copy of a state may lag the
	// gateway's once the link is up.
	convergeWait = 10 * time.Second
)

// harness is a site: its broker, and the nodes (a gateway on its own
// Mosquitto, bridged to the site's broker) on it.
type harness struct {
	t     *testing.T
	site  *testenv.PersistentBroker
	users map[string]string // the site's users and their passwords
	nodes []*node
	begun time.Time

	siteDown atomic.Bool // the site's broker is stopped
	localIDs []string    // ids of the commands of controllers on the nodes' own Mosquittos
}

// node is a gateway on its own Mosquitto, bridged to the site through a
// proxy that the test cuts.
type node struct {
	h      *harness
	n      int
	id     string
	topics wire.Topics
	dir    string
	cfg    string // gateway.yaml
	http   string // the gateway's API, host:port
	local  *testenv.PersistentBroker
	proxy  *testenv.Proxy
	bridge string // the bridge's section of the local Mosquitto's configuration

	mu   sync.Mutex
	gw   *testenv.Process   // the gateway that runs, nil while stopped
	runs []*testenv.Process // every gateway process of this node

	main, old *stream
}

// password returns a new random password.
func password() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// gatewayConfig is a gateway's configuration: id on broker, its store in
// its own directory, its API on http; with a user, mqtt.username too.
func gatewayConfig(id, broker, http, user string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\nmqtt:\n  broker: %s\n", id, broker)
	if user != "" {
		fmt.Fprintf(&b, "  username: %s\n", user)
	}
	fmt.Fprintf(&b, "store: fence.db\nboard: sim\nhttp: %q\nactuators:\n", http)
	for _, a := range actuators {
		fmt.Fprintf(&b, "  - {name: %s, pin: %s, scope: %s}\n", a.name, a.pin, a.scope)
	}
	return b.String()
}

// gateway runs the gateway program with args and returns its output; it
// fails t if the program fails.
func gateway(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(gatewayBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gateway %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// controllerACL keeps, of a `gateway acl` output, the sections of the
// users named.
func controllerACL(acl string, users ...string) string {
	var keep []string
	for _, section := range strings.Split(acl, "\n\n") {
		for _, u := range users {
			if strings.HasPrefix(strings.TrimSpace(section), "user "+u+"\n") {
				keep = append(keep, strings.TrimSpace(section))
			}
		}
	}
	return strings.Join(keep, "\n\n")
}

// newSite starts the site's broker and, for n nodes, each a proxy to it
// and a Mosquitto whose configuration includes the bridge that gateway
// bridge writes for the node's gateway. Its users are the bridges' (one
// per node, with the lines gateway bridge --site-acl prints), the
// controllers ctl and old (the lines gateway acl prints for them), and
// watch, the test's own, who reads every topic of the gateways.
func newSite(t *testing.T, n int) *harness {
	t.Helper()
	h := &harness{t: t, users: map[string]string{"ctl": password(), "old": password(), "watch": password()}, begun: time.Now()}
	var acl strings.Builder
	ports := map[*node]int{}
	for i := 1; i <= n; i++ {
		nd := &node{h: h, n: i, id: testenv.ID(t, fmt.Sprintf("gw%d", i)), dir: t.TempDir()}
		nd.topics = wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: nd.id}
		ports[nd] = testenv.Port(t)
		nd.http = fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
		nd.cfg = writeFile(t, nd.dir, "gateway.yaml", gatewayConfig(nd.id, fmt.Sprintf("tcp://127.0.0.1:%d", ports[nd]), nd.http, ""))
		bridgeUser := fmt.Sprintf("bridge-%d", i)
		h.users[bridgeUser] = password()
		acl.WriteString(gateway(t, "bridge", "--config", nd.cfg, "--site-acl", bridgeUser) + "\n")
		// gateway acl needs the gateway's own user (its lines are for the
		// gateway's broker, not the site's): a copy of the configuration
		// with one, of which only the controllers' lines are kept.
		aclCfg := writeFile(t, t.TempDir(), "gateway.yaml", gatewayConfig(nd.id, "tcp://127.0.0.1:1883", "", "gateway"))
		acl.WriteString(controllerACL(gateway(t, "acl", "--config", aclCfg, "--controller", "ctl", "--controller", "old"), "ctl", "old") + "\n\n")
		fmt.Fprintf(&acl, "user watch\ntopic read %s#\n\n", strings.TrimSuffix(nd.topics.Status(), "status"))
		h.nodes = append(h.nodes, nd)
	}
	h.site = testenv.MosquittoWith(t, testenv.BrokerOptions{Users: h.users, ACL: acl.String(), Persistent: true, Conf: "log_timestamp_format %H:%M:%S\n"})
	t.Cleanup(func() {
		if t.Failed() {
			h.logBrokers()
		}
	})
	for _, nd := range h.nodes {
		nd.proxy = testenv.NewProxy(t, strings.TrimPrefix(h.site.URL, "tcp://"))
		nd.bridge = nd.bridgeConf(fmt.Sprintf("bridge-%d", nd.n), fmt.Sprintf("pi%d", nd.n), nd.proxy.Addr)
		nd.local = localMosquitto(t, ports[nd], nd.bridge)
	}
	return h
}

// logBrokers logs what every Mosquitto of the site logged.
func (h *harness) logBrokers() {
	h.t.Logf("the site's Mosquitto logged:\n%s", h.site.Log())
	for _, nd := range h.nodes {
		h.t.Logf("node %d's Mosquitto logged:\n%s", nd.n, nd.local.Log())
	}
}

// startNodes starts each node's gateway and waits until it is online on
// the site.
func (h *harness) startNodes() {
	h.t.Helper()
	for _, nd := range h.nodes {
		nd.startGateway(true)
	}
	for _, nd := range h.nodes {
		if _, err := nd.waitLinked(linkWait); err != nil {
			h.t.Fatalf("node %d: %v", nd.n, err)
		}
	}
}

// bridgeConf writes a bridge file for the site's broker at addr, as user
// (whose password is the site's), and returns the bridge's section of
// Mosquitto's configuration that gateway bridge writes from it for this
// node's gateway, on host hostID.
func (nd *node) bridgeConf(user, hostID, addr string) string {
	nd.h.t.Helper()
	return nd.h.bridgeConf(nd.cfg, user, hostID, addr)
}

// bridgeConf is node.bridgeConf for the gateway configuration cfg.
func (h *harness) bridgeConf(cfg, user, hostID, addr string) string {
	t := h.t
	t.Helper()
	dir := t.TempDir()
	site := writeFile(t, dir, "bridge.txt", fmt.Sprintf("# the site's broker, through the test's proxy\nbroker: tcp://%s\nusername: %s\n", addr, user))
	pw := writeFile(t, dir, "password", h.users[user]+"\n")
	creds := filepath.Join(dir, "credentials") // plain TCP: no CA, no client certificate
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	return gateway(t, "bridge", "--config", cfg, "--site", site, "--credentials", creds, "--password-file", pw, "--host-id", hostID)
}

// localMosquitto starts a node's own Mosquitto on port, anonymous, with
// the bridge section conf.
func localMosquitto(t *testing.T, port int, conf string) *testenv.PersistentBroker {
	t.Helper()
	return testenv.MosquittoWith(t, testenv.BrokerOptions{Port: port, Conf: "log_timestamp_format %H:%M:%S\n" + conf})
}

// running returns the node's running gateway, nil if none.
func (nd *node) running() *testenv.Process {
	nd.mu.Lock()
	p := nd.gw
	nd.mu.Unlock()
	if p == nil {
		return nil
	}
	if _, exited := p.Exited(0); exited {
		return nil
	}
	return p
}

// startGateway starts the node's gateway (with --init the first time) and
// waits until it serves on its own Mosquitto (see serving).
func (nd *node) startGateway(init bool) *testenv.Process {
	nd.h.t.Helper()
	p, err := nd.launch(init)
	if err != nil {
		nd.h.t.Fatal(err)
	}
	return p
}

// launch is startGateway for any goroutine: it returns an error if the
// gateway does not serve within 20 s, with its output.
func (nd *node) launch(init bool) (*testenv.Process, error) {
	args := []string{"run", "--config", nd.cfg, "--log-level", "info"}
	if init {
		args = append(args, "--init")
	}
	nd.mu.Lock()
	name := fmt.Sprintf("gateway%d-run%d", nd.n, len(nd.runs)+1)
	nd.mu.Unlock()
	p := testenv.Start(nd.h.t, name, exec.Command(gatewayBin, args...))
	nd.mu.Lock()
	nd.gw, nd.runs = p, append(nd.runs, p)
	nd.mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if status, ok := p.Exited(0); ok {
			return p, fmt.Errorf("node %d: gateway %s exited with status %d at start:\n%s", nd.n, name, status, p.Output())
		}
		why := nd.serving(p)
		if why == "" {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("node %d: gateway %s does not serve within 20 s: %s\n%s", nd.n, name, why, p.Output())
		}
	}
}

// serving says why p does not serve on its own Mosquitto yet ("" if it
// does): its API answers, and that broker holds its claim and its online
// status.
func (nd *node) serving(p *testenv.Process) string {
	if !testenv.Listens(p.Pid(), nd.http) {
		return "its API does not listen on " + nd.http
	}
	if _, err := testctl.ReadActuators(nd.http); err != nil {
		return "its API: " + err.Error()
	}
	c, status, err := nd.localClaim()
	switch {
	case err != nil:
		return err.Error()
	case c.PID != p.Pid():
		return fmt.Sprintf("its Mosquitto holds the claim of pid %d", c.PID)
	case status != wire.StatusOnline:
		return fmt.Sprintf("its Mosquitto holds status %q", status)
	}
	return ""
}

// localClaim reads the claim and the status that the node's own Mosquitto
// holds.
func (nd *node) localClaim() (wire.Claim, string, error) {
	m, err := readRetained(nd.local.URL, "", "", []string{nd.topics.Instance(), nd.topics.Status()}, time.Second)
	if err != nil {
		return wire.Claim{}, "", fmt.Errorf("its Mosquitto: %v", err)
	}
	c, err := wire.DecodeClaim([]byte(m[nd.topics.Instance()]))
	if err != nil {
		return c, m[nd.topics.Status()], fmt.Errorf("its Mosquitto's claim %q: %v", m[nd.topics.Instance()], err)
	}
	return c, m[nd.topics.Status()], nil
}

// linkTopic is where the bridge says on both brokers whether it is up.
func (nd *node) linkTopic() string {
	return strings.TrimSuffix(nd.topics.Status(), "status") + "bridge"
}

// siteRead reads the retained messages on topics at the site's broker as
// user.
func (h *harness) siteRead(user string, topics ...string) (map[string]string, error) {
	return readRetained(h.site.URL, user, h.users[user], topics, time.Second)
}

// linked says why the node's bridge does not carry its gateway's topics
// now ("" if it does): the proxy relays a connection the site answered,
// and the site holds the link's 1, the gateway's online status, and the
// claim that the node's own Mosquitto holds.
func (nd *node) linked() string {
	if nd.h.siteDown.Load() {
		return "the site's broker is stopped"
	}
	if !nd.proxy.Up() {
		return "no connection through the proxy that the site answered"
	}
	local, _, err := nd.localClaim()
	if err != nil {
		return err.Error()
	}
	m, err := nd.h.siteRead("watch", nd.linkTopic(), nd.topics.Status(), nd.topics.Instance())
	if err != nil {
		return "the site's broker: " + err.Error()
	}
	site, _ := wire.DecodeClaim([]byte(m[nd.topics.Instance()]))
	switch {
	case m[nd.linkTopic()] != "1":
		return fmt.Sprintf("the site holds %q on %s", m[nd.linkTopic()], nd.linkTopic())
	case m[nd.topics.Status()] != wire.StatusOnline:
		return fmt.Sprintf("the site holds status %q", m[nd.topics.Status()])
	case site.Instance != local.Instance || site.Connection != local.Connection || site.Conflict != "":
		return fmt.Sprintf("the site holds the claim %q, the node's Mosquitto that of instance %s (pid %d, connection %d)",
			m[nd.topics.Instance()], local.Instance, local.PID, local.Connection)
	}
	return ""
}

// waitLinked waits up to d until the node's bridge carries its topics
// (see linked) and returns how long that took.
func (nd *node) waitLinked(d time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		nd.mu.Lock()
		p := nd.gw
		nd.mu.Unlock()
		if status, exited := p.Exited(0); exited {
			return 0, fmt.Errorf("gateway %s (pid %d) exited with status %d:\n%s", nd.id, p.Pid(), status, lines(p.Output(), "gateway id", "claim", "conflict"))
		}
		why := nd.linked()
		if why == "" {
			return time.Since(start), nil
		}
		if time.Since(start) > d {
			return 0, fmt.Errorf("the bridge does not carry gateway %s's topics to the site within %v: %s", nd.id, d, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// back says why the link is not back for a controller of the node
// ("" if it is): the site's broker runs, the proxy relays a connection
// that the site answered, and the gateway serves its API.
func (nd *node) back() string {
	switch {
	case nd.h.siteDown.Load():
		return "the site's broker is stopped"
	case !nd.proxy.Up():
		return "no connection through the proxy that the site answered"
	case nd.running() == nil:
		return "the gateway is stopped"
	}
	if _, err := testctl.ReadActuators(nd.http); err != nil {
		return "the gateway's API: " + err.Error()
	}
	return ""
}

// sameState says how the state of actuator a that user reads on the site
// differs from the gateway's own, read from its API ("" if it does not).
func (nd *node) sameState(user, a string) string {
	m, err := nd.h.siteRead(user, nd.topics.State(a))
	if err != nil {
		return "the site's broker: " + err.Error()
	}
	payload, ok := m[nd.topics.State(a)]
	if !ok {
		return "the site holds no state of " + a
	}
	site, err := wire.DecodeState([]byte(payload))
	if err != nil {
		return fmt.Sprintf("the site's state of %s, %q: %v", a, payload, err)
	}
	own, err := nd.apiState(a)
	if err != nil {
		return "the gateway's API: " + err.Error()
	}
	if site.State.String() != own.State || site.Fence != own.Fence || site.Holder != own.Holder {
		return fmt.Sprintf("the site holds %s at %s (holder %s), the gateway %s at %s (holder %s)",
			site.State, site.Fence, site.Holder, own.State, own.Fence, own.Holder)
	}
	return ""
}

// apiState returns actuator a as the gateway's API says.
func (nd *node) apiState(a string) (httpapi.Actuator, error) {
	list, err := testctl.ReadActuators(nd.http)
	if err != nil {
		return httpapi.Actuator{}, err
	}
	for _, x := range list {
		if x.Name == a {
			return x, nil
		}
	}
	return httpapi.Actuator{}, fmt.Errorf("no actuator %s", a)
}

// siteState returns the state of actuator a that the site holds.
func (nd *node) siteState(a string) (fence.Output, error) {
	m, err := nd.h.siteRead("watch", nd.topics.State(a))
	if err != nil {
		return fence.Output{}, err
	}
	payload, ok := m[nd.topics.State(a)]
	if !ok {
		return fence.Output{}, errors.New("the site holds no state of " + a)
	}
	return wire.DecodeState([]byte(payload))
}

// applied returns the gateway's applied decisions, oldest first: from its
// API while it runs, else from its store (gateway audit --store).
func (nd *node) applied() ([]fencelog.Entry, error) {
	if nd.running() != nil {
		return testctl.ReadAudit(nd.http, "outcome=applied&n=10000")
	}
	return storeApplied(filepath.Join(nd.dir, "fence.db"))
}

// storeApplied returns the applied decisions of a stopped gateway's store,
// oldest first, as gateway audit --store prints them.
func storeApplied(store string) ([]fencelog.Entry, error) {
	out, err := exec.Command(gatewayBin, "audit", "--store", store, "--outcome", "applied", "-n", "10000", "--json").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gateway audit --store %s: %v: %s", store, err, out)
	}
	var es []fencelog.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var e fencelog.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("gateway audit --store %s: %v: %s", store, err, line)
		}
		es = append(es, e)
	}
	return es, nil
}

var readSeq atomic.Uint64

// readRetained subscribes afresh, as user (with password; "" for none),
// to topics at broker and returns the retained message of each that has
// one, as the broker delivers them to a new subscription. It waits up to
// wait for those that have none.
func readRetained(broker, user, password string, topics []string, wait time.Duration) (map[string]string, error) {
	opts := mqtt.NewClientOptions().AddBroker(broker).
		SetClientID(fmt.Sprintf("fencegate-site-test-%d-%d", os.Getpid(), readSeq.Add(1))).
		SetUsername(user).SetPassword(password).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectTimeout(2 * time.Second)
	c := mqtt.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(3 * time.Second) {
		return nil, errors.New("connect: no answer within 3 s")
	} else if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer c.Disconnect(0)
	var mu sync.Mutex
	got := map[string]string{}
	all := make(chan struct{})
	filters := map[string]byte{}
	for _, topic := range topics {
		filters[topic] = 0
	}
	tok := c.SubscribeMultiple(filters, func(_ mqtt.Client, m mqtt.Message) {
		if !m.Retained() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := got[m.Topic()]; seen || len(got) == len(filters) {
			return
		}
		got[m.Topic()] = string(m.Payload())
		if len(got) == len(filters) {
			close(all)
		}
	})
	if !tok.WaitTimeout(3 * time.Second) {
		return nil, errors.New("subscribe: no answer within 3 s")
	} else if err := tok.Error(); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	select {
	case <-all:
	case <-time.After(wait):
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(got), nil
}

// dial connects a controller of the node's gateway to broker as user
// ("" for none).
func (nd *node) dial(broker, user string) *client.Client {
	t := nd.h.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: nd.id, Username: user, Password: nd.h.users[user]})
	if err != nil {
		t.Fatalf("node %d: controller %s: %v", nd.n, user, err)
	}
	t.Cleanup(c.Close)
	return c
}

// restartSite stops the site's broker with sig and starts it again on its
// port, with what it saved (it saves at a clean stop only).
func (h *harness) restartSite(sig syscall.Signal) {
	h.t.Helper()
	h.siteDown.Store(true)
	h.site.Stop(h.t, sig)
	h.site.Start(h.t)
	h.siteDown.Store(false)
}
