//go:build imagetest && linux

package piimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
)

// card is an SD card: the image, as dd or bmaptool writes it, padded to
// the power-of-two size QEMU's SD card model requires.
type card struct {
	path     string
	bootOff  int64 // the boot partition's first byte
	bootSize int64 // and its length in bytes
}

// newCard writes the image xz (checked against its .sha256) to a card in
// dir.
func newCard(t *testing.T, xz, dir string) *card {
	t.Helper()
	sum, err := os.ReadFile(xz + ".sha256")
	if err != nil {
		t.Fatalf("the image's checksum: %v (make image writes NAME.img.xz.sha256 beside it)", err)
	}
	out, err := exec.Command("sha256sum", xz).Output()
	if err != nil || strings.Fields(string(out))[0] != strings.Fields(string(sum))[0] {
		t.Fatalf("%s does not match its .sha256 (%v)", xz, err)
	}
	c := &card{path: filepath.Join(dir, "card.img")}
	f, err := os.Create(c.path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("xz", "-dc", xz)
	cmd.Stdout = f
	if err := cmd.Run(); err != nil {
		t.Fatalf("xz -dc %s: %v", xz, err)
	}
	st, _ := f.Stat()
	size := int64(1) << (64 - bits.LeadingZeros64(uint64(st.Size()-1)))
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	js, err := exec.Command("sfdisk", "-J", c.path).Output()
	if err != nil {
		t.Fatalf("sfdisk -J: %v", err)
	}
	var pt struct {
		PartitionTable struct {
			SectorSize int64 `json:"sectorsize"`
			Partitions []struct {
				Start int64  `json:"start"`
				Size  int64  `json:"size"`
				Type  string `json:"type"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(js, &pt); err != nil || len(pt.PartitionTable.Partitions) != 2 {
		t.Fatalf("partition table %s: %v; want two partitions", js, err)
	}
	ss := pt.PartitionTable.SectorSize
	if ss == 0 {
		ss = 512
	}
	c.bootOff = pt.PartitionTable.Partitions[0].Start * ss
	c.bootSize = pt.PartitionTable.Partitions[0].Size * ss
	if c.bootSize <= 0 {
		t.Fatalf("partition table %s: the boot partition has no size", js)
	}
	t.Logf("card: %s, %d MB (image %d MB)", c.path, size>>20, st.Size()>>20)
	return c
}

func (c *card) fat() string { return fmt.Sprintf("%s@@%d", c.path, c.bootOff) }

// put writes a file into the boot partition's fencegate folder, as a
// user does on a laptop.
func (c *card) put(t *testing.T, name, text string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(src, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Dir(name); dir != "." {
		exec.Command("mmd", "-i", c.fat(), "::fencegate/"+dir).Run() // may exist
	}
	if out, err := exec.Command("mcopy", "-o", "-i", c.fat(), src, "::fencegate/"+name).CombinedOutput(); err != nil {
		t.Fatalf("mcopy %s: %v\n%s", name, err, out)
	}
}

// bootHas reports whether the boot partition's raw bytes hold s, as dd
// and strings on a laptop would find it: in a file, in a removed file's
// freed clusters, or past a file's end.
func (c *card) bootHas(t *testing.T, s string) bool {
	t.Helper()
	f, err := os.Open(c.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return indexIn(t, f, c.bootOff, c.bootSize, s) >= 0
}

// get reads a file of the boot partition.
func (c *card) get(t *testing.T, name string) (string, bool) {
	t.Helper()
	out, err := exec.Command("mtype", "-i", c.fat(), "::"+name).Output()
	return string(out), err == nil
}

// pi is the emulated Raspberry Pi 3B with the card in it.
type pi struct {
	t       *testing.T // the running step's
	root    *testing.T // TestImage's: QEMU and tunnels end with it
	card    *card
	dir     string
	key     string // SSH private key, whose public half is on the card
	ssh     int    // host ports forwarded to the Pi's 22 and 1883, and (tunnel) to its API
	mqtt    int
	api     int
	cmd     *exec.Cmd
	exited  chan struct{}
	console string
	boots   int
	// tunnelCmd forwards api to the gateway's API (tunnel).
	tunnelCmd  *exec.Cmd
	tunnelDone chan struct{}
	// master is one SSH connection per boot that the commands share: a
	// new connection costs the emulated Pi seconds of key exchange and
	// session set-up, and the tests run hundreds of commands.
	master     *exec.Cmd
	masterDone chan struct{}
	masterSock string
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func newPi(t *testing.T, c *card) *pi {
	dir := t.TempDir()
	p := &pi{t: t, root: t, card: c, dir: dir, key: filepath.Join(dir, "id_ed25519")}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "image-test", "-f", p.key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return p
}

func (p *pi) publicKey() string {
	b, err := os.ReadFile(p.key + ".pub")
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}

// boot starts QEMU as a Pi's firmware would: the kernel, initramfs, device
// tree and command line read from the card's boot partition. It returns
// once the Pi answers SSH.
func (p *pi) boot(ctx context.Context) {
	t := p.t
	t.Helper()
	p.boots++
	files := bootFiles(t, p.card.fat(), p.dir)
	p.ssh, p.mqtt, p.api = testenv.Port(t), testenv.Port(t), testenv.Port(t)
	p.console = filepath.Join(p.dir, fmt.Sprintf("console-%d.log", p.boots))
	// qemuArgs (qemuargs_test.go), as piimage/qemu.sh boots the image for
	// users, but for the console, in a file here.
	p.cmd = exec.Command("qemu-system-aarch64", qemuArgs(files, p.card.path, p.ssh, p.mqtt, "file:"+p.console)...)
	// Its own group (kill ends it all); and it dies with the test
	// process, however that ends, so no emulated Pi keeps a core busy.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	p.cmd.Stdout, p.cmd.Stderr = &out, &out
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	p.exited = make(chan struct{})
	go func() { p.cmd.Wait(); close(p.exited) }()
	p.root.Cleanup(func() { p.kill() })
	// A boot takes 1.5 to 2.5 minutes here; one that takes 10 is stuck.
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		select {
		case <-p.exited:
			t.Fatalf("boot %d: QEMU ended (%s) before the Pi answered SSH:\n%s\n--- console (tail) ---\n%s", p.boots, p.cmd.ProcessState, out.String(), p.consoleTail(60))
		case <-bctx.Done():
			t.Fatalf("boot %d: no SSH after %v\n--- console (tail) ---\n%s", p.boots, time.Since(start).Round(time.Second), p.consoleTail(60))
		case <-time.After(2 * time.Second):
		}
		if c, _ := os.ReadFile(p.console); bytes.Contains(c, []byte("Reached target emergency.target")) || bytes.Contains(c, []byte("Emergency Mode")) {
			t.Fatalf("boot %d: the Pi stopped in emergency mode\n--- console (tail) ---\n%s", p.boots, p.consoleTail(80))
		}
		if _, err := p.run("true"); err == nil {
			t.Logf("boot %d: SSH answers %.0f s after power-on", p.boots, time.Since(start).Seconds())
			p.startMaster(bctx)
			return
		}
	}
}

func (p *pi) consoleTail(n int) string {
	b, _ := os.ReadFile(p.console)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sshCmd is ssh to the Pi as root, with the key from the card, the
// options opts and the remote command (none if ""). Without options it
// goes through the boot's master connection while that runs (ssh
// connects on its own if the master is gone).
func (p *pi) sshCmd(opts []string, command string) *exec.Cmd {
	if opts == nil && p.master != nil {
		opts = []string{"-o", "ControlMaster=no", "-o", "ControlPath=" + p.masterSock}
	}
	args := append([]string{"-i", p.key, "-p", strconv.Itoa(p.ssh), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"}, opts...)
	args = append(args, "root@127.0.0.1")
	if command != "" {
		args = append(args, command)
	}
	return exec.Command("ssh", args...)
}

// startSSH starts ssh -N with opts, for as long as the test runs (or it
// is killed); done closes when it ends, out holds what it said.
func (p *pi) startSSH(what string, opts ...string) (cmd *exec.Cmd, done chan struct{}, out *bytes.Buffer) {
	cmd = p.sshCmd(append([]string{"-N"}, opts...), "")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	done = make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.root.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd, done, out
}

// startMaster opens the boot's master connection, which the commands
// share until stopMaster (a power cut or shutdown).
func (p *pi) startMaster(ctx context.Context) {
	p.stopMaster()
	sock := filepath.Join(p.dir, fmt.Sprintf("ssh-%d", p.boots))
	cmd, done, out := p.startSSH("ssh -M", "-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-o", "ControlPath="+sock,
		"-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")
	for exec.Command("ssh", "-o", "ControlPath="+sock, "-O", "check", "root@127.0.0.1").Run() != nil {
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			p.t.Fatalf("the SSH master connection never came up: %s", out.String())
		case <-done:
			p.t.Fatalf("the SSH master connection ended: %s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	p.master, p.masterDone, p.masterSock = cmd, done, sock
}

// stopMaster closes the boot's master connection: commands connect on
// their own again.
func (p *pi) stopMaster() {
	if p.master == nil {
		return
	}
	p.master.Process.Kill()
	<-p.masterDone
	p.master = nil
}

// run runs a shell command on the Pi as root, over SSH.
func (p *pi) run(command string) (string, error) {
	out, err := p.sshCmd(nil, command).CombinedOutput()
	return string(out), err
}

// must runs a command on the Pi and fails the test if it fails.
func (p *pi) must(command string) string {
	p.t.Helper()
	out, err := p.run(command)
	if err != nil {
		p.t.Fatalf("on the Pi: %s: %v\n%s", command, err, out)
	}
	return out
}

// waitFor runs command on the Pi until its output matches re.
func (p *pi) waitFor(ctx context.Context, command string, re *regexp.Regexp) string {
	p.t.Helper()
	var out string
	for {
		out, _ = p.run(command)
		if re.MatchString(out) {
			return out
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("on the Pi: %s never matched %s; last:\n%s", command, re, out)
		case <-time.After(time.Second):
		}
	}
}

// shutdown powers the Pi off cleanly (poweroff, or reboot: both end QEMU).
func (p *pi) shutdown(how string) {
	p.t.Helper()
	p.run("systemctl " + how + " --no-block")
	select {
	case <-p.exited:
	case <-time.After(3 * time.Minute):
		p.t.Fatalf("the Pi did not %s within 3 minutes\n%s", how, p.consoleTail(40))
	}
	p.stopMaster()
}

// kill cuts the power: QEMU dies with SIGKILL, and what the guest kernel
// had not written to the card is lost.
func (p *pi) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	p.stopMaster()
}

// gpio returns the Pi kernel's view of a header line ("out hi", "out lo"),
// from /sys/kernel/debug/gpio.
func (p *pi) gpio(line string) string {
	p.t.Helper()
	out := p.must("cat /sys/kernel/debug/gpio")
	re := regexp.MustCompile(`(?m)^\s*gpio-\d+\s+\(` + regexp.QuoteMeta(line) + `\s*\|[^)]*\)\s+(out|in)\s+(hi|lo)`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		p.t.Fatalf("/sys/kernel/debug/gpio has no line %s in use:\n%s", line, out)
	}
	return m[1] + " " + m[2]
}

// pwmDuty is the kernel's duty_cycle of the PWM controller's channel 0,
// in ns: what the dimmer's set-point became.
func (p *pi) pwmDuty() string {
	return strings.TrimSpace(p.must("cat /sys/class/pwm/pwmchip*/pwm0/duty_cycle"))
}

// tunnel forwards the host's p.api to the gateway's API on the Pi's
// loopback (http: 127.0.0.1:8080 in the example), as the docs do.
func (p *pi) tunnel(ctx context.Context) {
	if p.tunnelCmd != nil {
		p.tunnelCmd.Process.Kill()
		<-p.tunnelDone
	}
	cmd, exited, out := p.startSSH("ssh -L", "-o", "ExitOnForwardFailure=yes", "-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:8080", p.api))
	p.tunnelCmd, p.tunnelDone = cmd, exited
	for {
		if resp, err := httpClient.Get(fmt.Sprintf("http://127.0.0.1:%d/api/status", p.api)); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatal("the tunnel to the gateway's API never answered")
		case <-exited:
			p.t.Fatalf("ssh -L ended: %s", out.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// actuators reads the gateway's JSON API on the Pi.
func (p *pi) actuators() map[string]httpapi.Actuator {
	p.t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("http://127.0.0.1:%d/api/actuators", p.api))
	if err != nil {
		p.t.Fatalf("the gateway's API: %v", err)
	}
	defer resp.Body.Close()
	var list []httpapi.Actuator
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		p.t.Fatalf("the gateway's API: %v", err)
	}
	m := map[string]httpapi.Actuator{}
	for _, a := range list {
		m[a.Name] = a
	}
	return m
}
