//go:build imagetest && linux

package piimage

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
)

var regexpActive = regexp.MustCompile(`^active`)

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// theDeb is the fencegate .deb the image holds, from dist/ beside it.
func theDeb(t *testing.T, xz string) (path, version string) {
	manifest := strings.TrimSuffix(xz, ".img.xz") + ".manifest" // xz: image() resolved latest.img.xz
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatalf("the image's manifest: %v", err)
	}
	m := regexp.MustCompile(`(?m)^fencegate\t(\S+)\tarm64$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s names no fencegate package", manifest)
	}
	version = string(m[1])
	path = filepath.Join(filepath.Dir(filepath.Dir(manifest)), "fencegate_"+version+"_arm64.deb")
	if p := os.Getenv("FENCEGATE_IMAGE_DEB"); p != "" {
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the image's .deb: %v (make image leaves it in dist/; or set FENCEGATE_IMAGE_DEB)", err)
	}
	return path, version
}

// repack writes a copy of deb with another version and, if binary is not
// "", another /usr/bin/gateway.
func repack(t *testing.T, deb, version, binary string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if out, err := exec.Command("dpkg-deb", "-R", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v\n%s", err, out)
	}
	control := filepath.Join(root, "DEBIAN", "control")
	b, err := os.ReadFile(control)
	if err != nil {
		t.Fatal(err)
	}
	b = regexp.MustCompile(`(?m)^Version: .*$`).ReplaceAll(b, []byte("Version: "+version))
	if err := os.WriteFile(control, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if binary != "" {
		if out, err := exec.Command("install", "-m", "0755", binary, filepath.Join(root, "usr/bin/gateway")).CombinedOutput(); err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
	}
	out := filepath.Join(dir, "fencegate_"+version+"_arm64.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zxz", "-b", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v\n%s", err, b)
	}
	return out
}

// timed runs cmd on the Pi as must does, and logs how long it took: the
// emulated Pi runs apt and dpkg slowly, and the image job is CI's longest.
func (p *pi) timed(t *testing.T, what, cmd string) {
	t.Helper()
	start := time.Now()
	p.must(cmd)
	t.Logf("%s: %.0f s", what, time.Since(start).Seconds())
}

// copyTo copies a host file to the Pi.
func (p *pi) copyTo(t *testing.T, local, remote string) {
	t.Helper()
	f, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := p.sshCmd(nil, "cat > "+remote)
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copy %s to the Pi: %v\n%s", local, err, out)
	}
}

// traceGPIO starts recording every level the Pi's kernel writes to a GPIO
// line (gpiolib's gpio_value tracepoint); the returned function stops and
// returns the writes to each header line (GPIO17, GPIO27), as "set 0" and
// "set 1".
func (p *pi) traceGPIO(t *testing.T) func() map[string][]string {
	t.Helper()
	nums := map[string]string{}
	for _, m := range regexp.MustCompile(`gpio-(\d+)\s+\((GPIO\d+)\s*[|)]`).FindAllStringSubmatch(p.must("cat /sys/kernel/debug/gpio"), -1) {
		nums[m[1]] = m[2]
	}
	p.must("cd /sys/kernel/tracing && echo 0 > tracing_on && echo > trace && echo 1 > events/gpio/gpio_value/enable && echo 1 > tracing_on")
	return func() map[string][]string {
		out := p.must("cd /sys/kernel/tracing && echo 0 > tracing_on && echo 0 > events/gpio/gpio_value/enable && cat trace")
		sets := map[string][]string{}
		for _, m := range regexp.MustCompile(`gpio_value: (\d+) (set|get) (\d)`).FindAllStringSubmatch(out, -1) {
			if line := nums[m[1]]; line != "" && m[2] == "set" {
				sets[line] = append(sets[line], "set "+m[3])
			}
		}
		return sets
	}
}

// upgrade installs newer packages of fencegate on the running Pi (a .deb,
// then apt-get upgrade from a local repository), and then one whose
// gateway cannot read the store.
func upgrade(ctx context.Context, t *testing.T, pi *pi, ctl *controllerConn) {
	deb, version := theDeb(t, image(t))
	// The fan (boot: last) on, so that a restart that let its line go
	// would show; the pump (boot: off) is off, as every start leaves it.
	tok := pi.actuators()["fan"].Fence.Token + 1
	if r := ctl.send(ctx, t, "fan", tok, fence.StateOn); r.Outcome != fence.Applied || pi.gpio("GPIO27") != "out lo" {
		t.Fatalf("before the upgrade: fan on: %s; want applied, out lo", r.Outcome)
	}
	if r := ctl.send(ctx, t, "pump", pi.actuators()["pump"].Fence.Token+1, fence.StateOff); r.Outcome != fence.Applied {
		t.Fatalf("before the upgrade: pump off: %s; want applied", r.Outcome)
	}
	ctl.close()
	kept := "sha256sum /etc/fencegate/gateway.yaml /etc/fencegate/mqtt.password /etc/mosquitto/passwd; ls -i /var/lib/fencegate/fence.db"
	before := pi.must(kept)
	mainPID := func() string { return strings.TrimSpace(pi.must("systemctl show -p MainPID --value fencegate")) }

	// 1. apt install ./newer.deb, as docs/raspberry-pi.md says.
	newer := repack(t, deb, version+"+up1", "")
	pi.copyTo(t, newer, "/root/"+filepath.Base(newer))
	pid := mainPID()
	stopTrace := pi.traceGPIO(t)
	pi.timed(t, "apt-get install ./newer.deb", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold /root/"+filepath.Base(newer))
	pi.waitFor(ctx, "systemctl is-active fencegate", regexpActive)
	checkUpgraded(ctx, t, pi, version+"+up1", pid, mainPID(), tok, stopTrace())

	// 2. apt-get upgrade from a local repository (a folder with Packages).
	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(repo, 0o755)
	newest := repack(t, deb, version+"+up2", "")
	if out, err := exec.Command("cp", newest, repo).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	scan := exec.Command("dpkg-scanpackages", "--multiversion", ".")
	scan.Dir = repo
	pkgs, err := scan.Output()
	if err != nil {
		t.Fatalf("dpkg-scanpackages: %v", err)
	}
	os.WriteFile(filepath.Join(repo, "Packages"), pkgs, 0o644)
	pi.must("mkdir -p /srv/repo")
	for _, f := range []string{filepath.Base(newest), "Packages"} {
		pi.copyTo(t, filepath.Join(repo, f), "/srv/repo/"+f)
	}
	pi.must("echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list.d/local.list")
	only := "-o Dir::Etc::SourceList=/etc/apt/sources.list.d/local.list -o Dir::Etc::SourceParts=-"
	pid = mainPID()
	stopTrace = pi.traceGPIO(t)
	pi.timed(t, "apt-get update && apt-get upgrade", "apt-get update -q "+only+" && DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -q "+only+" -o Dpkg::Options::=--force-confold")
	pi.waitFor(ctx, "systemctl is-active fencegate", regexpActive)
	checkUpgraded(ctx, t, pi, version+"+up2", pid, mainPID(), tok, stopTrace())
	if after := pi.must(kept); after != before {
		t.Errorf("the upgrades changed the configuration, passwords or store:\nbefore\n%s\nafter\n%s", before, after)
	}

	// 3. A downgrade to a build that reads another store format: it
	// refuses to start, says why, and moves no line.
	old := filepath.Join(t.TempDir(), "gateway")
	buildOldFormat(t, old)
	older := repack(t, deb, "0.0.0~old", old)
	pi.copyTo(t, older, "/root/"+filepath.Base(older))
	stopTrace = pi.traceGPIO(t)
	pi.timed(t, "apt-get install --allow-downgrades ./older.deb", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold /root/"+filepath.Base(older))
	pi.waitFor(ctx, "systemctl is-failed fencegate; systemctl is-active fencegate", regexp.MustCompile(`^failed`))
	journal := pi.must("journalctl -b -u fencegate -n 30 --no-pager")
	if !strings.Contains(journal, "was it written by a newer fencegate?") {
		t.Errorf("the older gateway's refusal does not say why:\n%s", journal)
	}
	if sets := stopTrace(); len(sets["GPIO27"]) > 0 || len(sets["GPIO17"]) > 0 {
		t.Errorf("the refused downgrade wrote the relays' lines: %v", sets)
	}
	// And back: the store, untouched by the refused build, opens again.
	pi.timed(t, "apt-get install ./newest.deb", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold /srv/repo/"+filepath.Base(newest)+" && systemctl restart fencegate")
	pi.waitFor(ctx, "systemctl is-active fencegate", regexpActive)
	pi.tunnel(ctx)
	if a := pi.actuators()["fan"]; a.Fence.Token != tok || a.State != "on" || pi.gpio("GPIO27") != "out lo" {
		t.Errorf("after the refused downgrade and the upgrade back: fan at %d %s, line %s; want %d on, out lo", a.Fence.Token, a.State, pi.gpio("GPIO27"), tok)
	}
}

// checkUpgraded: the new version runs (a new process), the fan's fence and
// state are kept, and its line was never written off (no click); the
// pump, off, was never written on.
func checkUpgraded(ctx context.Context, t *testing.T, pi *pi, version, oldPID, newPID string, tok uint64, sets map[string][]string) {
	t.Helper()
	if v := strings.TrimSpace(pi.must("dpkg-query -W -f '${Version}' fencegate")); v != version {
		t.Errorf("installed fencegate %s; want %s", v, version)
	}
	if oldPID == newPID {
		t.Errorf("the gateway was not restarted by the upgrade to %s (MainPID %s)", version, newPID)
	}
	for line, level := range map[string]string{"GPIO27": "set 0", "GPIO17": "set 1"} {
		for _, s := range sets[line] {
			if s != level {
				t.Errorf("upgrade to %s: %s was written %v, away from its level (%s): the relay clicked", version, line, sets[line], level)
				break
			}
		}
	}
	pi.tunnel(ctx)
	if a := pi.actuators()["fan"]; a.Fence.Token != tok || a.State != "on" || pi.gpio("GPIO27") != "out lo" || pi.gpio("GPIO17") != "out hi" {
		t.Errorf("after the upgrade to %s: fan fence %d %s, line %s, pump's line %s; want %d on, out lo, out hi", version, a.Fence.Token, a.State, pi.gpio("GPIO27"), pi.gpio("GPIO17"), tok)
	}
	t.Logf("upgrade to %s: restarted, fence %d kept, line writes %v", version, tok, sets)
}

// buildOldFormat builds the gateway for the Pi as a build that reads
// another store format would be: fencelog's format version changed through
// go build -overlay, nothing else.
func buildOldFormat(t *testing.T, out string) {
	t.Helper()
	src, err := filepath.Abs("../fencelog/fencelog.go")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	const decl = `const formatVersion = "1"`
	if !strings.Contains(string(b), decl) {
		t.Fatalf("%s has no %s", src, decl)
	}
	dir := t.TempDir()
	patched := filepath.Join(dir, "fencelog.go")
	os.WriteFile(patched, []byte(strings.Replace(string(b), decl, `const formatVersion = "0"`, 1)), 0o644)
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{src: patched}})
	os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644)
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "nosim", "-overlay", filepath.Join(dir, "overlay.json"), "-o", out, "../cmd/gateway")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (old store format): %v\n%s", err, b)
	}
}
