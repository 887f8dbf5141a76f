//go:build imagetest

package piimage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sitebridge"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// siteBroker is a Mosquitto on the host in the role of a site's broker:
// the Pi's bridge comes in over TLS with a client certificate and a
// password (port tls, which the Pi reaches as 10.0.2.2), and the test's
// controller over plain TCP on another port.
type siteBroker struct {
	tls, plain             int
	certs                  *testenv.Certs
	bridgeUser, bridgePass string
	ctlUser, ctlPass       string
}

func startSiteBroker(t *testing.T) *siteBroker {
	t.Helper()
	mosq := testenv.Program(t, "mosquitto")
	passwd := testenv.Program(t, "mosquitto_passwd")
	// Certificates older than the image: the emulated Pi's clock starts
	// at the image's date (it has no battery clock, and no time server
	// answers in the test), as a Pi's does until it has the time.
	s := &siteBroker{tls: testenv.Port(t), plain: testenv.Port(t), certs: testenv.MakePiCerts(t),
		bridgeUser: "bridge-" + gatewayID, bridgePass: fmt.Sprintf("site-pw-%x", rand.Uint64()),
		ctlUser: "site-controller", ctlPass: fmt.Sprintf("ctl-%x", rand.Uint64())}
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	// The gateway's own user (for the Pi connecting directly) has the
	// same password as the bridge's: both come from the card's one
	// site/password.
	for i, u := range [][2]string{{s.bridgeUser, s.bridgePass}, {s.ctlUser, s.ctlPass}, {gatewayID, s.bridgePass}} {
		args := []string{"-b", pw, u[0], u[1]}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(passwd, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
	acl, err := sitebridge.SiteACL(s.bridgeUser, sitebridge.Options{Topics: wire.Topics{GatewayID: gatewayID}})
	if err != nil {
		t.Fatal(err)
	}
	acl += fmt.Sprintf("\nuser %s\ntopic write fencegate/%s/+/set\ntopic read fencegate/%s/#\n", s.ctlUser, gatewayID, gatewayID) + s.gatewayACL()
	// user root: a Mosquitto started as root (CI) would otherwise become
	// user mosquitto, who cannot read the test's files.
	conf := fmt.Sprintf(`per_listener_settings false
user root
allow_anonymous false
password_file %s
acl_file %s
listener %d 127.0.0.1
cafile %s
certfile %s
keyfile %s
require_certificate true
listener %d 127.0.0.1
`, pw, filepath.Join(dir, "acl"), s.tls, s.certs.CA, s.certs.Server, s.certs.ServerKey, s.plain)
	for name, text := range map[string]string{"acl": acl, "mosquitto.conf": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosq, "-c", filepath.Join(dir, "mosquitto.conf"), "-v")
	cmd.Stdout, cmd.Stderr = log, log
	if err := testenv.StartChild(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- the site broker's log (tail) ---\n%s", b)
		}
	})
	return s
}

// putOnCard puts the site's files in the card's folder: bridge.txt and
// site/ (the CA, this Pi's client certificate and key, the password). It
// returns what must not stay on the card.
func (s *siteBroker) putOnCard(t *testing.T, c *card) (secrets []string) {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	c.put(t, "bridge.txt", fmt.Sprintf("# the site's broker\r\nbroker: tls://10.0.2.2:%d\r\nusername: %s\r\n", s.tls, s.bridgeUser))
	c.put(t, "site/ca.crt", read(s.certs.CA))
	c.put(t, "site/client.crt", read(s.certs.Client))
	key := read(s.certs.ClientKey)
	c.put(t, "site/client.key", key)
	c.put(t, "site/password", s.bridgePass+"\r\n")
	// A line of the key's body: what strings on the card would show.
	body := strings.Split(strings.TrimSpace(key), "\n")[1]
	return []string{s.bridgePass, body}
}

// checkBridge checks, after the first boot, that the Pi took the site's
// files and that a controller on the site's broker commands the gateway
// through the bridge: answers and states come back, the fence holds.
func (s *siteBroker) checkBridge(ctx context.Context, t *testing.T, pi *pi) {
	t.Helper()
	status := pi.must("cat /boot/firmware/fencegate/status.txt")
	for _, want := range []string{
		fmt.Sprintf("broker: this Pi's Mosquitto bridges fencegate/%s/ to the site's broker tls://10.0.2.2:%d (TLS with the site's CA and this Pi's client certificate, user %s with site/password)", gatewayID, s.tls, s.bridgeUser),
		"site: password installed", "site: client.key installed",
	} {
		if !strings.Contains(status, want) {
			t.Errorf("status.txt does not say %q:\n%s", want, status)
		}
	}
	if left := pi.must("ls -a /boot/firmware/fencegate"); regexp.MustCompile(`(?m)^(bridge\.txt|site)$`).MatchString(left) {
		t.Errorf("bridge.txt or site/ is still in the card's folder:\n%s", left)
	}
	modes := pi.must("stat -c '%n %U:%G %a' /etc/mosquitto/conf.d/bridge.conf /etc/mosquitto/bridge/client.key /etc/fencegate/site/password")
	for _, want := range []string{"/etc/mosquitto/conf.d/bridge.conf root:mosquitto 640", "/etc/mosquitto/bridge/client.key root:mosquitto 640",
		"/etc/fencegate/site/password root:fencegate 640"} {
		if !strings.Contains(modes, want) {
			t.Errorf("want %q:\n%s", want, modes)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cl := s.controller(dctx, t, pi, "mosquitto")
	defer cl.Close()
	tok := pi.actuators()["pump"].Fence.Token + 2
	send := func(token uint64, st fence.State) fence.Result {
		r, err := cl.Send(dctx, fence.Command{ID: fmt.Sprintf("site-%d", token), Holder: "site-controller", Actuator: "pump",
			Fence: fence.Fence{Token: token}, State: st})
		if err != nil && r.Outcome == "" {
			t.Fatalf("token %d through the bridge: %v", token, err)
		}
		return r
	}
	if r := send(tok, fence.StateOn); r.Outcome != fence.Applied || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("pump on through the bridge: %s (%s), line %s; want applied, out lo", r.Outcome, r.Error, pi.gpio("GPIO17"))
	}
	if r := send(tok-1, fence.StateOff); r.Outcome != fence.Stale || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("a stale token through the bridge: %s, line %s; want stale, out lo", r.Outcome, pi.gpio("GPIO17"))
	}
	if st, ok := cl.State("pump"); !ok || st.Fence.Token != tok || st.State != fence.StateOn {
		t.Errorf("the pump's state on the site's broker: %+v (%v); want on at %d", st, ok, tok)
	}
}

// controller connects a controller to the site's broker and waits until
// the gateway is online there; if it is not, the journal of the Pi's unit
// (mosquitto, whose bridge carries it, or fencegate) says why.
func (s *siteBroker) controller(ctx context.Context, t *testing.T, pi *pi, unit string) *client.Client {
	t.Helper()
	cl, err := client.Dial(ctx, client.Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", s.plain), GatewayID: gatewayID,
		Username: s.ctlUser, Password: s.ctlPass, Resend: 5 * time.Second})
	if err != nil {
		t.Fatalf("controller on the site's broker: %v", err)
	}
	if err := cl.WaitStatus(ctx, "online"); err != nil {
		cl.Close()
		t.Fatalf("on the site's broker the gateway is not online: %v\n%s", err,
			pi.must("journalctl -b -u "+unit+" --no-pager -o short-monotonic | tail -30"))
	}
	return cl
}

// gatewayUser is the gateway's own user on the site's broker, for a Pi
// that connects there directly; its ACL lines are what gateway acl grants
// a gateway.
func (s *siteBroker) gatewayACL() string {
	t := wire.Topics{GatewayID: gatewayID}
	return fmt.Sprintf("\nuser %s\ntopic readwrite %s\ntopic readwrite %s\ntopic write %s\ntopic write %s\ntopic write %s\ntopic write %s\n",
		gatewayID, t.SetFilter(), t.Instance(), t.ReplyFilter(), t.ResultFilter(), t.StateFilter(), t.Status())
}

// checkDirect switches the Pi from the bridge to the site's broker
// directly, as a user does from the card (a gateway.yaml whose mqtt.broker
// is the site's, with the files of site/), and checks that this Pi's
// Mosquitto is off, the bridge gone, and that a controller on the site's
// broker commands the gateway, fenced, over its own TLS connection.
func (s *siteBroker) checkDirect(ctx context.Context, t *testing.T, pi *pi) {
	t.Helper()
	cfg := pi.must("cat /etc/fencegate/gateway.yaml")
	local := "  broker: tcp://127.0.0.1:1883\n  username: gateway\n  password_file: /etc/fencegate/mqtt.password\n"
	if !strings.Contains(cfg, local) {
		t.Fatalf("the Pi's gateway.yaml has no mqtt lines for its own Mosquitto to replace:\n%s", cfg)
	}
	direct := fmt.Sprintf("  broker: tls://10.0.2.2:%d\n  username: %s\n  password_file: /etc/fencegate/site/password\n"+
		"  tls:\n    ca_file: /etc/fencegate/site/ca.crt\n    cert_file: /etc/fencegate/site/client.crt\n    key_file: /etc/fencegate/site/client.key\n",
		s.tls, gatewayID)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(cfg, local, direct, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The same password for the gateway's own user as the bridge's: the
	// one site/password the Pi holds.
	pi.copyTo(t, file, "/boot/firmware/fencegate/gateway.yaml")
	pi.must("systemctl restart fencegate-bootconfig && systemctl restart mosquitto && systemctl restart fencegate")
	status := pi.must("cat /boot/firmware/fencegate/status.txt")
	for _, want := range []string{
		fmt.Sprintf("broker: the gateway connects to the site's broker tls://10.0.2.2:%d directly; this Pi's Mosquitto is off", s.tls),
		"broker: the bridge to the site's broker is removed", "gateway.yaml: applied", "the gateway starts",
	} {
		if !strings.Contains(status, want) {
			t.Errorf("status.txt does not say %q:\n%s", want, status)
		}
	}
	if st := pi.must("systemctl is-active mosquitto; ls /etc/mosquitto/conf.d; true"); !strings.HasPrefix(st, "inactive") || strings.Contains(st, "bridge.conf") {
		t.Errorf("with the gateway on the site's broker, this Pi's Mosquitto is not off, or its bridge is still there:\n%s", st)
	}
	pi.waitFor(ctx, "systemctl is-active fencegate", regexp.MustCompile(`^active`))
	dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cl := s.controller(dctx, t, pi, "fencegate")
	defer cl.Close()
	tok := pi.actuators()["pump"].Fence.Token + 1
	r, err := cl.Send(dctx, fence.Command{ID: fmt.Sprintf("direct-%d", tok), Holder: "site-controller", Actuator: "pump",
		Fence: fence.Fence{Token: tok}, State: fence.StateOn})
	if err != nil || r.Outcome != fence.Applied || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("pump on over the direct connection: %s (%v), line %s; want applied, out lo", r.Outcome, err, pi.gpio("GPIO17"))
	}
	r, err = cl.Send(dctx, fence.Command{ID: fmt.Sprintf("direct-stale-%d", tok), Holder: "site-controller", Actuator: "pump",
		Fence: fence.Fence{Token: tok - 1}, State: fence.StateOff})
	if r.Outcome != fence.Stale || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("a stale token over the direct connection: %s (%v), line %s; want stale, out lo", r.Outcome, err, pi.gpio("GPIO17"))
	}
}
