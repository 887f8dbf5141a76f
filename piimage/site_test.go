//go:build imagetest

package piimage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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
	s := &siteBroker{tls: testenv.Port(t), plain: testenv.Port(t), certs: testenv.MakeCerts(t),
		bridgeUser: "bridge-" + gatewayID, bridgePass: fmt.Sprintf("site-pw-%x", rand.Uint64()),
		ctlUser: "site-controller", ctlPass: fmt.Sprintf("ctl-%x", rand.Uint64())}
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	for i, u := range [][2]string{{s.bridgeUser, s.bridgePass}, {s.ctlUser, s.ctlPass}} {
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
	acl += fmt.Sprintf("\nuser %s\ntopic write fencegate/%s/+/set\ntopic read fencegate/%s/#\n", s.ctlUser, gatewayID, gatewayID)
	conf := fmt.Sprintf(`per_listener_settings false
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
	if left := pi.must("ls -a /boot/firmware/fencegate"); strings.Contains(left, "bridge.txt") || strings.Contains(left, "site") {
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
	cl, err := client.Dial(dctx, client.Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", s.plain), GatewayID: gatewayID,
		Username: s.ctlUser, Password: s.ctlPass, Resend: 5 * time.Second})
	if err != nil {
		t.Fatalf("controller on the site's broker: %v", err)
	}
	defer cl.Close()
	if err := cl.WaitStatus(dctx, "online"); err != nil {
		t.Fatalf("on the site's broker the gateway is not online (the bridge did not connect?): %v\n%s", err,
			pi.must("journalctl -b -u mosquitto --no-pager -o short-monotonic | tail -30"))
	}
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
