//go:build imagetest && linux

package piimage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/tests/testenv"
)

// The card's configuration, as docs/raspberry-pi.md has a user write it:
// gateway.yaml is the image's own gateway.yaml.example with a second
// relay added, the fan, whose boot rule is last, a set-point on the Pi 3's
// PWM controller, the dimmer (docs/raspberry-pi.md, PWM set-points), and
// a relay of a Modbus TCP module on the network, the lamp (the module runs
// in the test, on the host, which the emulated Pi reaches as 10.0.2.2).
const (
	gatewayID  = "greenhouse-1"
	controller = "controller"
	floor      = 100
	fan        = `  - name: fan
    pin: GPIO27
    active_low: true
    boot: last                # keeps its recorded state through restarts and upgrades
  - name: dimmer
    pwm: {chip: 3f20c000.pwm, channel: 0, frequency: 1000}
    boot: last
  - name: lamp
    modbus: {bus: relays, unit: 1, coil: 0}
    boot: last
modbus:
  - {name: relays, url: "tcp://10.0.2.2:%d", poll: 1s}
`
)

// image returns the image make image wrote last, or $FENCEGATE_IMAGE.
func image(t *testing.T) string {
	p := os.Getenv("FENCEGATE_IMAGE")
	if p == "" {
		p = "../dist/image/latest.img.xz"
	}
	abs, err := filepath.Abs(p)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		t.Fatalf("no image at %s (%v): run make image first (as root), or set FENCEGATE_IMAGE", p, err)
	}
	return abs
}

// cuts is how many power cuts TestImage makes: $FENCEGATE_IMAGE_CUTS
// (make image-torture), else 3.
func cuts(t *testing.T) int {
	if s := os.Getenv("FENCEGATE_IMAGE_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("FENCEGATE_IMAGE_CUTS=%q: want a count", s)
		}
		return n
	}
	return 3
}

// TestImage boots the image make image wrote in the emulated Raspberry Pi
// 3B, configured on its boot partition as a user would, then reboots it,
// cuts its power under commands and upgrades it. Each step goes on from
// the state the one before left, as on a real card.
func TestImage(t *testing.T) {
	for _, p := range []string{"qemu-system-aarch64", "xz", "sfdisk", "mcopy", "ssh", "ssh-keygen"} {
		testenv.Program(t, p)
	}
	xz := image(t)
	c := newCard(t, xz, t.TempDir())
	pi := newPi(t, c)
	deadline := time.Now().Add(110 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-time.Minute) // room to report, before go test's own timeout
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	example, ok := c.get(t, "fencegate/gateway.yaml.example")
	if !ok {
		t.Fatal("the card has no fencegate/gateway.yaml.example")
	}
	password := fmt.Sprintf("pw-%x", rand.Uint64())
	port := testenv.Port(t)
	mod, err := modbussim.Start(fmt.Sprintf("tcp://127.0.0.1:%d", port), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	c.put(t, "gateway.yaml", example+fmt.Sprintf(fan, port))
	c.put(t, "store.txt", fmt.Sprintf("floor: %d\n", floor))
	c.put(t, "passwd", "# the controllers' accounts\n"+controller+":"+password+"\n")
	// broker.key alone (TLS waits for broker.crt; the controllers go on
	// using 1883): the Pi takes it off the card all the same.
	keyMark := fmt.Sprintf("KEY-%x", rand.Uint64())
	c.put(t, "broker.key", "-----BEGIN PRIVATE KEY-----\n"+keyMark+"\n"+strings.Repeat("MC4CAQAwBQYDK2VwBCIEIFq0aXlR3sZ8pHk2QvJ0\n", 60)+keyMark+"\n-----END PRIVATE KEY-----\n")
	// Wi-Fi, on a Pi without a radio (checkWiFi): the passphrase leaves
	// the card with the file.
	wifiPass := fmt.Sprintf("wifi-%016x", rand.Uint64())
	c.put(t, "wifi.txt", wifiText(wifiPass))
	// What the card must not hold, anywhere on its boot partition, once
	// the Pi has taken these files.
	secrets := []string{password, keyMark, wifiPass}
	// The site's broker, reached through this Pi's Mosquitto's bridge.
	site := startSiteBroker(t)
	secrets = append(secrets, site.putOnCard(t, c)...)
	// What a laptop's user gets wrong: Notepad's .txt, and a private key
	// put where the public one should go. The first stays, said; the
	// second is a secret and leaves the card.
	c.put(t, "authorized_keys.txt", pi.publicKey())
	privMark := fmt.Sprintf("PRIV-%x", rand.Uint64())
	c.put(t, "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n"+privMark+"\n-----END OPENSSH PRIVATE KEY-----\n")
	secrets = append(secrets, privMark)
	// A controller's private key in keys/, beside where its public key
	// goes: never installed, and off the card.
	keyMark2 := fmt.Sprintf("CTLKEY-%x", rand.Uint64())
	c.put(t, "keys/ctl.key", "-----BEGIN PRIVATE KEY-----\n"+keyMark2+"\n-----END PRIVATE KEY-----\n")
	secrets = append(secrets, keyMark2)
	for _, s := range secrets {
		if !c.bootHas(t, s) {
			t.Fatalf("%q is not on the card's boot partition after mcopy: the scan does not see what a laptop would", s)
		}
	}
	c.put(t, "authorized_keys", pi.publicKey())
	c.put(t, "hostname.txt", "greenhouse\n")

	var ctl *controllerConn
	steps := []struct {
		name string
		f    func(t *testing.T)
	}{
		{"first-boot", func(t *testing.T) {
			pi.boot(ctx)
			firstBoot(ctx, t, pi, password)
			checkWiFi(ctx, t, pi, wifiPass)
			// Not in the folder, and not on the card either: the Pi
			// overwrote the files before it removed them, and the zeros
			// are on the card, not only in the Pi's cache.
			noSecretsOnCard(t, c, "after the first boot", secrets)
			ctl = dialController(ctx, t, pi, password)
			commands(ctx, t, pi, ctl)
			site.checkBridge(ctx, t, pi)
			// The Modbus relay, over the Pi's network.
			if r := ctl.send(ctx, t, "lamp", floor+1, fence.StateOn); r.Outcome != fence.Applied || !mod.Coil(0) {
				t.Fatalf("lamp on: %s (%s), coil %v; want applied, on", r.Outcome, r.Error, mod.Coil(0))
			}
		}},
		{"reboot", func(t *testing.T) {
			if r := ctl.send(ctx, t, "fan", floor+4, fence.StateOn); r.Outcome != fence.Applied || pi.gpio("GPIO27") != "out lo" {
				t.Fatalf("fan on: %s, line %s; want applied, out lo", r.Outcome, pi.gpio("GPIO27"))
			}
			ctl.close()
			before := pi.actuators()["pump"]
			// A configuration with a mistake, put on the card for the next
			// boot: refused, said so, the gateway stays stopped, no line is
			// taken; mended, the gateway starts.
			bad := strings.Replace(example, "pin: GPIO17", "pin: GPIO99", 1)
			if bad == example {
				t.Fatal("the example gateway.yaml has no pin: GPIO17 to spoil")
			}
			badFile := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(badFile, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			pi.copyTo(t, badFile, "/boot/firmware/fencegate/gateway.yaml")
			pi.shutdown("reboot")
			// Powered off, as a user takes the card out (issue 33).
			noSecretsOnCard(t, c, "after a clean shutdown", secrets)
			pi.boot(ctx)
			pi.waitFor(ctx, "systemctl is-active fencegate-bootconfig", regexp.MustCompile(`^(failed|active)`))
			// A clean reboot unmounted the boot partition: no check.
			if j := pi.must("systemctl is-active fencegate-fatcheck; journalctl -b -o cat -u fencegate-fatcheck"); !strings.HasPrefix(j, "active") || strings.Contains(j, "checking it") {
				t.Errorf("after a clean reboot the boot partition's check is not active, or checked it:\n%s", j)
			}
			if st := pi.must("systemctl is-active fencegate; true"); !strings.HasPrefix(st, "inactive") {
				t.Errorf("with a bad gateway.yaml the gateway is %q; want inactive (not started)", strings.TrimSpace(st))
			}
			status := pi.must("cat /boot/firmware/fencegate/status.txt; ls /boot/firmware/fencegate")
			for _, want := range []string{"gateway.yaml is not valid", "GPIO99", "the gateway is NOT started", "gateway.yaml\r\n"} {
				if !strings.Contains(strings.ReplaceAll(status, "\r\n", "\n"), strings.ReplaceAll(want, "\r\n", "\n")) {
					t.Errorf("after a bad gateway.yaml, status.txt and the folder do not say %q:\n%s", want, status)
				}
			}
			if gpio := pi.must("cat /sys/kernel/debug/gpio"); regexp.MustCompile(`\((GPIO17|GPIO27)\s*\|`).MatchString(gpio) {
				t.Errorf("with the gateway stopped, a relay's line is taken:\n%s", gpio)
			}
			pi.must("rm /boot/firmware/fencegate/gateway.yaml && systemctl restart fencegate-bootconfig && systemctl start fencegate")
			pi.waitFor(ctx, "systemctl is-active fencegate", regexp.MustCompile(`^active`))
			pi.tunnel(ctx)
			after := pi.actuators()["pump"]
			if after.Fence != before.Fence {
				t.Fatalf("after a clean reboot the pump's fence is %v; it was %v", after.Fence, before.Fence)
			}
			// The example's boot rule is off: the record says so, and the line.
			if after.State != "off" || pi.gpio("GPIO17") != "out hi" {
				t.Fatalf("after the reboot: pump %s, line %s; want off (boot: off), out hi (active low)", after.State, pi.gpio("GPIO17"))
			}
			// The fan's boot rule is last: on, as recorded.
			if f := pi.actuators()["fan"]; f.State != "on" || f.Fence.Token != floor+4 || pi.gpio("GPIO27") != "out lo" {
				t.Fatalf("after the reboot: fan %s at %v, line %s; want on at %d (boot: last), out lo", f.State, f.Fence, pi.gpio("GPIO27"), floor+4)
			}
			// The lamp's boot rule is last: on, as recorded; its module
			// answers.
			if l := pi.actuators()["lamp"]; l.State != "on" || l.Watched == nil || l.Watched.Down != "" || !mod.Coil(0) {
				t.Fatalf("after the reboot: lamp %+v, coil %v; want on (boot: last), answering", l, mod.Coil(0))
			}
			// The dimmer's boot rule is last: its set-point, as recorded.
			if d := pi.actuators()["dimmer"]; d.Duty == nil || *d.Duty != 4250 || pi.pwmDuty() != "425000" {
				t.Fatalf("after the reboot: dimmer %v, duty_cycle %q; want 42.5 (boot: last), 425000", d.Duty, pi.pwmDuty())
			}
			ctl = dialController(ctx, t, pi, password)
			stale := ctl.send(ctx, t, "pump", before.Fence.Token-1, fence.StateOn)
			if stale.Outcome != fence.Stale || pi.gpio("GPIO17") != "out hi" {
				t.Fatalf("a token below the fence after the reboot: %s, line %s; want stale, out hi", stale.Outcome, pi.gpio("GPIO17"))
			}
		}},
		{"power-cuts", func(t *testing.T) { powerCuts(ctx, t, pi, &ctl, password, cuts(t)) }},
		{"upgrade", func(t *testing.T) { upgrade(ctx, t, pi, ctl) }},
		{"site-direct", func(t *testing.T) { site.checkDirect(ctx, t, pi) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { pi.t = t; s.f(t) }) {
			pi.t = t
			t.Logf("--- console of the last boot (tail) ---\n%s", pi.consoleTail(80))
			return
		}
	}
}

// firstBoot checks what the first boot made of the card's folder.
func firstBoot(ctx context.Context, t *testing.T, pi *pi, password string) {
	pi.waitFor(ctx, "systemctl is-active fencegate", regexp.MustCompile(`^active`))
	// Where the emulated Pi's boot time goes: the figures to start from
	// when the image job is what keeps CI long.
	t.Logf("first boot:\n%s", pi.must("systemd-analyze time; systemd-analyze blame | head -12; systemd-analyze critical-chain"))
	status := pi.must("cat /boot/firmware/fencegate/status.txt")
	for _, want := range []string{"gateway.yaml: applied", fmt.Sprintf("store: made (floor: %d)", floor),
		`"authorized_keys.txt": not a file the Pi takes, so it stays on the card: did you mean authorized_keys?`,
		`WARNING: "id_ed25519" is a private key, which must never be on the card: the Pi overwrote and removed it`,
		"WARNING: keys/ctl.key is a private key, which must never be on the card nor on the gateway", "broker: controllers " + controller, "broker: broker.key installed",
		"SSH: root's authorized keys set (1 keys)", "host name: greenhouse", "the gateway starts"} {
		if !strings.Contains(status, want) {
			t.Errorf("status.txt does not say %q:\n%s", want, status)
		}
	}
	// Nothing secret stays on the FAT partition.
	left := pi.must("ls /boot/firmware/fencegate")
	for _, gone := range []string{"passwd", "broker.key", "authorized_keys", "gateway.yaml", "store.txt", "hostname.txt"} {
		if regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(gone) + `$`).MatchString(left) {
			t.Errorf("%s is still on the boot partition after the first boot:\n%s", gone, left)
		}
	}
	modes := pi.must("stat -c '%n %U:%G %a' /etc/mosquitto/passwd /etc/mosquitto/acl /etc/fencegate/mqtt.password /etc/fencegate/gateway.yaml /var/lib/fencegate/fence.db /root/.ssh/authorized_keys")
	for _, want := range []string{"/etc/mosquitto/passwd root:mosquitto 640", "/etc/mosquitto/acl root:mosquitto 640",
		"/etc/fencegate/mqtt.password root:fencegate 640", "/etc/fencegate/gateway.yaml root:fencegate 640",
		"/var/lib/fencegate/fence.db fencegate:fencegate 600", "/root/.ssh/authorized_keys root:root 600"} {
		if !strings.Contains(modes, want) {
			t.Errorf("want %q:\n%s", want, modes)
		}
	}
	if h := strings.TrimSpace(pi.must("hostname")); h != "greenhouse" {
		t.Errorf("host name %q, want greenhouse (hostname.txt)", h)
	}
	if strings.Contains(pi.must("cat /etc/mosquitto/passwd"), password) {
		t.Error("the controller's password is in /etc/mosquitto/passwd in the clear")
	}
	// Ready through sd_notify (Type=notify is active only after READY=1),
	// the unit's watchdog pinged, the board's watchdog armed by systemd.
	show := pi.must("systemctl show fencegate -p Type -p ActiveState -p WatchdogUSec -p WatchdogTimestampMonotonic -p NRestarts")
	for _, want := range []string{"Type=notify", "ActiveState=active", "WatchdogUSec=30s", "NRestarts=0"} {
		if !strings.Contains(show, want) {
			t.Errorf("systemctl show fencegate: want %s:\n%s\nits journal:\n%s", want, show,
				pi.must("journalctl -b -u fencegate -u fencegate-bootconfig -u mosquitto --no-pager -o short-monotonic | tail -60"))
		}
	}
	if strings.Contains(show, "WatchdogTimestampMonotonic=0\n") {
		t.Errorf("the gateway never pinged its watchdog:\n%s", show)
	}
	// The board's watchdog: its driver bound, and systemd told to arm it
	// (off here only by the test's kernel command line: see boot).
	if hw := pi.must("ls /dev/watchdog0; systemd-analyze cat-config systemd/system.conf | grep '^RuntimeWatchdogSec'"); !strings.Contains(hw, "/dev/watchdog0") || !strings.Contains(hw, "RuntimeWatchdogSec=15s") {
		t.Errorf("the board's watchdog is not there or not configured:\n%s", hw)
	}
	grown := pi.must("df -m --output=size / | tail -n 1")
	if n, _ := strconv.Atoi(strings.TrimSpace(grown)); int64(n) < (fileSize(t, pi.card.path)>>20)/2 {
		t.Errorf("the root file system is %s MB on a %d MB card: growroot did not grow it", strings.TrimSpace(grown), fileSize(t, pi.card.path)>>20)
	}
	// Mosquitto refuses an anonymous client.
	o := mqtt.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", pi.mqtt)).SetClientID("anonymous").SetConnectTimeout(20 * time.Second)
	anon := mqtt.NewClient(o)
	if tok := anon.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() == nil {
		anon.Disconnect(0)
		t.Errorf("Mosquitto on the Pi took an anonymous client (%v)", tok.Error())
	} else {
		t.Logf("anonymous client refused: %v", tok.Error())
	}
	pi.tunnel(ctx)
}

// noSecretsOnCard fails t for each secret that the card's boot partition
// still holds, read raw (dd | strings on a laptop), not listed.
func noSecretsOnCard(t *testing.T, c *card, when string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if c.bootHas(t, s) {
			t.Errorf("%s, %q is still on the card's boot partition (read raw): bootconfig removed its file without overwriting it", when, s)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// commands sends fenced commands from the host and checks the kernel's
// GPIO line after each (the example's pump: GPIO17, active low).
func commands(ctx context.Context, t *testing.T, pi *pi, ctl *controllerConn) {
	if r := ctl.send(ctx, t, "pump", floor, fence.StateOn); r.Outcome != fence.Stale {
		t.Fatalf("token %d, the floor itself: %s; want stale", floor, r.Outcome)
	}
	if r := ctl.send(ctx, t, "pump", floor+1, fence.StateOn); r.Outcome != fence.Applied || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("token %d on: %s, line %s; want applied, out lo", floor+1, r.Outcome, pi.gpio("GPIO17"))
	}
	if r := ctl.send(ctx, t, "pump", floor+2, fence.StateOff); r.Outcome != fence.Applied || pi.gpio("GPIO17") != "out hi" {
		t.Fatalf("token %d off: %s, line %s; want applied, out hi", floor+2, r.Outcome, pi.gpio("GPIO17"))
	}
	// A set-point on the kernel's PWM channel, through the hardened unit
	// and the package's udev rule: 42.5 % of 1 ms.
	if r := ctl.sendDuty(ctx, t, "dimmer", floor+1, 4250); r.Outcome != fence.Applied || pi.pwmDuty() != "425000" {
		t.Fatalf("dimmer 42.5 %%: %s %s (%s), duty_cycle %q; want applied, 425000", r.Outcome, r.Reason, r.Error, pi.pwmDuty())
	}
	// The paused controller of the README: an older token, refused.
	if r := ctl.send(ctx, t, "pump", floor+1, fence.StateOn); r.Outcome != fence.Stale || pi.gpio("GPIO17") != "out hi" {
		t.Fatalf("stale token %d on: %s, line %s; want stale, out hi", floor+1, r.Outcome, pi.gpio("GPIO17"))
	}
	if r := ctl.send(ctx, t, "pump", floor+3, fence.StateOn); r.Outcome != fence.Applied || pi.gpio("GPIO17") != "out lo" {
		t.Fatalf("token %d on: %s, line %s; want applied, out lo", floor+3, r.Outcome, pi.gpio("GPIO17"))
	}
	if a := pi.actuators()["pump"]; a.Fence.Token != floor+3 || a.State != "on" || a.Level != "low" {
		t.Fatalf("the gateway's API: pump %+v; want fence %d, on, level low", a, floor+3)
	}
}

// controllerConn is a controller on the host, through the Pi's Mosquitto.
type controllerConn struct {
	cl *client.Client
	n  int
}

func dialController(ctx context.Context, t *testing.T, pi *pi, password string) *controllerConn {
	t.Helper()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := client.Dial(dctx, client.Options{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", pi.mqtt), GatewayID: gatewayID,
		Username: controller, Password: password, Resend: 5 * time.Second})
	if err != nil {
		t.Fatalf("controller: %v", err)
	}
	if err := cl.WaitStatus(dctx, "online"); err != nil {
		t.Fatalf("controller: the gateway is not online: %v", err)
	}
	return &controllerConn{cl: cl}
}

func (c *controllerConn) close() { c.cl.Close() }

// sendDuty sends a set-point command and returns its answer; an answer
// that is neither applied, duplicate, stale nor rejected fails the test.
func (c *controllerConn) sendDuty(ctx context.Context, t *testing.T, actuator string, token uint64, d fence.Duty) fence.Result {
	t.Helper()
	c.n++
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := c.cl.Send(sctx, fence.Command{ID: fmt.Sprintf("image-%d-%d", token, c.n), Holder: "image-test", Actuator: actuator,
		Fence: fence.Fence{Token: token}, Setpoint: true, Duty: d, State: d.State()})
	var se *client.StaleError
	var re *client.RejectedError
	if err != nil && !errors.As(err, &se) && !errors.As(err, &re) {
		t.Fatalf("token %d duty %s: %v", token, d, err)
	}
	return r
}

// send sends a command and returns its answer; an answer that is not
// applied, duplicate or stale fails the test.
func (c *controllerConn) send(ctx context.Context, t *testing.T, actuator string, token uint64, s fence.State) fence.Result {
	t.Helper()
	c.n++
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := c.cl.Send(sctx, fence.Command{ID: fmt.Sprintf("image-%d-%d", token, c.n), Holder: "image-test", Actuator: actuator,
		Fence: fence.Fence{Token: token}, State: s})
	var se *client.StaleError
	if err != nil && !errors.As(err, &se) {
		t.Fatalf("token %d %s: %v", token, s, err)
	}
	return r
}
