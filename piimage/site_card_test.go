//go:build linux

package piimage

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// siteRun is a Pi's files for card_site: its /etc/fencegate and
// /etc/mosquitto, in a temporary directory.
type siteRun struct {
	card, etc, mq, off string
}

func newSiteRun(t *testing.T) *siteRun {
	dir := t.TempDir()
	r := &siteRun{card: filepath.Join(dir, "card"), etc: filepath.Join(dir, "etc-fencegate"), mq: filepath.Join(dir, "etc-mosquitto"),
		off: filepath.Join(dir, "run", "mosquitto-off")}
	for _, d := range []string{r.card, r.etc, filepath.Join(r.mq, "conf.d"), filepath.Join(dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *siteRun) put(t *testing.T, name, text string) {
	t.Helper()
	p := filepath.Join(r.card, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (r *siteRun) has(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// run runs bootconfig's card_site, as bootconfig sources it, with the
// configuration use (new: a new one, not yet through its full check),
// the gateway built from this tree, and install and chown stubbed for
// the Pi's users. It returns what status.txt would get.
func (r *siteRun) run(t *testing.T, use string, new bool) string {
	return r.runThen(t, use, new, false)
}

// runThen is run, and if apply, what bootconfig does once it has applied
// a new configuration (card_site_applied).
func (r *siteRun) runThen(t *testing.T, use string, new, apply bool) string {
	t.Helper()
	lib, err := filepath.Abs(imageLib)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(r.card), "bin")
	// install without its -o and -g (the Pi's users), chown a no-op.
	stubs := map[string]string{
		"install": "#!/bin/sh\nargs=\"\"\nwhile [ $# -gt 0 ]; do case $1 in -o|-g) shift 2 ;; *) args=\"$args $1\"; shift ;; esac; done\nexec /usr/bin/install $args\n",
		"chown":   "#!/bin/sh\nexit 0\n",
	}
	for n, s := range stubs {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	status := filepath.Join(filepath.Dir(r.card), "status")
	os.Remove(status)
	newVar := ""
	if new {
		newVar = use
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `set -u
eval "$(sed -n '/^say() {/p; /^refuse() {/p; /^has() {/p; /^clean() {/p; /^off_card() {/,/^}/p' "$1/bootconfig")"
LIB=$1
. "$1/shred.sh"
. "$1/cardfiles.sh"
. "$1/site.sh"
card_site
[ -z "$APPLY" ] || card_site_applied`, "sh", lib)
	cmd.Env = append(os.Environ(), "CARD="+r.card, "STATUS_NEW="+status, "PATH="+bin+":"+os.Getenv("PATH"), "ETC="+r.etc, "MQ="+r.mq,
		"USE="+use, "NEW="+newVar, "APPLY="+map[bool]string{true: "yes"}[apply], "FENCEGATE_MQ_OFF="+r.off, "FENCEGATE_GATEWAY="+gatewayBinary(t))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("card_site: %v\n%s", err, out.String())
	}
	b, _ := os.ReadFile(status)
	return string(b)
}

func wants(t *testing.T, when, status string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(status, l) {
			t.Errorf("%s: status does not say %q:\n%s", when, l, status)
		}
	}
}

// TestCardSite: bootconfig's card_site takes the card's site/ folder off
// the card whole (subfolders, stray private keys), writes Mosquitto's
// bridge from bridge.txt, turns it off with "off", keeps a refused
// bridge.txt on the card unless it may hold a password, and for a
// gateway on the site's broker turns this Pi's Mosquitto off, removing
// the bridge only once that configuration is the applied one.
func TestCardSite(t *testing.T) {
	testenv.Program(t, "sh")
	certs := testenv.MakeCerts(t)
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := newSiteRun(t)
	local := filepath.Join(r.etc, "gateway.yaml")
	cfg := "id: gh-1\nmqtt:\n  broker: tcp://127.0.0.1:1883\n  username: gateway\nstore: fence.db\nboard: sim\nactuators:\n  - {name: pump, pin: GPIO17}\n"
	if err := os.WriteFile(local, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r.put(t, "site/ca.crt", read(certs.CA))
	r.put(t, "site/password", "pw with space\r\n")
	r.put(t, "site/old/password", "older-secret\n")
	r.put(t, "site/ca.key", read(certs.ClientKey))
	r.put(t, "bridge.txt", "broker: tls://broker.site.lan:8883\r\nusername: gh-1\r\n")
	st := r.run(t, local, false)
	wants(t, "first boot", st, "site: ca.crt installed", "site: password installed", "site/old/password: not a file the Pi takes",
		"WARNING: site/ca.key was a private key", "broker: this Pi's Mosquitto bridges fencegate/gh-1/ to the site's broker tls://broker.site.lan:8883 (TLS with the site's CA, user gh-1 with site/password)")
	if r.has(filepath.Join(r.card, "site")) || r.has(filepath.Join(r.card, "bridge.txt")) {
		t.Errorf("site/ or bridge.txt is still on the card")
	}
	if pw := read(filepath.Join(r.etc, "site", "password")); pw != "pw with space" {
		t.Errorf("site/password installed as %q, want the line without its end", pw)
	}
	conf := read(filepath.Join(r.mq, "conf.d", "bridge.conf"))
	wants(t, "bridge.conf", conf, "remote_password pw with space\n", "bridge_cafile "+filepath.Join(r.mq, "bridge", "ca.crt")+"\n")

	// A refused bridge.txt stays to be mended, and the bridge as it was;
	// one that may hold a password leaves the card.
	r.put(t, "bridge.txt", "broker: tls://broker.site.lan:8883\nusernme: gh-1\n")
	st = r.run(t, local, false)
	wants(t, "a misspelt key", st, "bridge.txt is not valid, so the bridge stays as it was", "fencegate/bridge.txt (on the card) line 2")
	if !r.has(filepath.Join(r.card, "bridge.txt")) || read(filepath.Join(r.mq, "conf.d", "bridge.conf")) != conf {
		t.Errorf("a refused bridge.txt left the card, or changed the bridge")
	}
	r.put(t, "bridge.txt", "broker: tls://broker.site.lan:8883\nPassword: Hunter2\n")
	st = r.run(t, local, false)
	wants(t, "a password in bridge.txt", st, "bridge.txt was removed from the card all the same")
	if r.has(filepath.Join(r.card, "bridge.txt")) || strings.Contains(st, "Hunter2") {
		t.Errorf("a bridge.txt with a password stayed on the card, or status repeats it:\n%s", st)
	}

	// Direct: a new configuration naming the site's broker turns this
	// Pi's Mosquitto off; the bridge goes only once it is applied.
	direct := filepath.Join(r.etc, "gateway.yaml.new")
	if err := os.WriteFile(direct, []byte(strings.Replace(cfg, "tcp://127.0.0.1:1883", "tls://broker.site.lan:8883", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	st = r.run(t, direct, true)
	wants(t, "direct, new", st, "broker: the gateway connects to the site's broker tls://broker.site.lan:8883 directly; this Pi's Mosquitto is off")
	if !r.has(r.off) || !r.has(filepath.Join(r.etc, "bridge.txt")) {
		t.Errorf("direct, not yet applied: Mosquitto not marked off (%v), or the bridge file removed already (%v)", r.has(r.off), !r.has(filepath.Join(r.etc, "bridge.txt")))
	}
	st = r.runThen(t, direct, true, true)
	wants(t, "direct, new, then applied", st, "broker: the bridge to the site's broker is removed")
	if r.has(filepath.Join(r.etc, "bridge.txt")) || r.has(filepath.Join(r.mq, "conf.d", "bridge.conf")) {
		t.Errorf("direct, applied: the bridge is still there")
	}

	// Back on this Pi's Mosquitto, a bridge again, then off.
	r.put(t, "bridge.txt", "broker: tls://broker.site.lan:8883\nusername: gh-1\n")
	st = r.run(t, local, false)
	if r.has(r.off) || !r.has(filepath.Join(r.mq, "conf.d", "bridge.conf")) {
		t.Errorf("back on the Pi's Mosquitto: still marked off (%v), or no bridge:\n%s", r.has(r.off), st)
	}
	r.put(t, "bridge.txt", "off\n")
	st = r.run(t, local, false)
	wants(t, "off", st, "broker: no bridge to the site's broker (bridge.txt said off)")
	if r.has(filepath.Join(r.mq, "conf.d", "bridge.conf")) || r.has(filepath.Join(r.etc, "bridge.txt")) {
		t.Errorf("off: the bridge is still there")
	}
}
