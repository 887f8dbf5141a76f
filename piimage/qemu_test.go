//go:build linux

package piimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// The fake image's layout, in 512-byte sectors: make image's, smaller.
const (
	fakeBootStart = 8192  // 4 MiB, as build.sh aligns it
	fakeBootSize  = 32768 // 16 MiB
	fakeRootStart = fakeBootStart + fakeBootSize
	fakeRootSize  = 2049 // the image is then no power of two
	fakeKernel    = "vmlinuz-6.12.38+deb13-arm64"
)

// fakeImage writes dir/fencegate-0-raspi-arm64.img.xz and its .sha256,
// laid out as make image's: an MBR, a FAT boot partition with the
// firmware's files (two kernels and initramfs, as after an upgrade, the
// newer last; the Pi 3B's device tree dtb; cmdline.txt) and the fencegate
// folder, and a root partition. It returns the .img.xz and its bytes
// uncompressed.
func fakeImage(t *testing.T, dir string, dtb []byte) (string, []byte) {
	t.Helper()
	mkfs := testenv.Program(t, "mkfs.fat")
	testenv.Program(t, "mcopy")
	testenv.Program(t, "xz")
	boot := filepath.Join(dir, "boot.img")
	if out, err := exec.Command(mkfs, "-n", "RASPIFIRM", "-F", "16", "-C", boot, strconv.Itoa(fakeBootSize/2)).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.fat: %v\n%s", err, out)
	}
	mtools(t, boot, "mmd", "::fencegate")
	for _, f := range []struct{ name, text string }{
		{"vmlinuz-6.12.30+deb13-arm64", "old kernel"}, {"initrd.img-6.12.30+deb13-arm64", "old initramfs"},
		{fakeKernel, "kernel"}, {"initrd.img-6.12.38+deb13-arm64", "initramfs"},
		{"bcm2837-rpi-3-b.dtb", string(dtb)},
		{"cmdline.txt", "\t console=tty0 console=ttyS1,115200 root=LABEL=RASPIROOT rw fsck.repair=yes net.ifnames=0 rootwait \r\n"},
		{"fencegate/README.txt", "the card's README\r\n"},
	} {
		src := filepath.Join(dir, "src")
		if err := os.WriteFile(src, []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
		mtools(t, boot, "mcopy", src, "::"+f.name)
	}
	fat, err := os.ReadFile(boot)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, (fakeRootStart+fakeRootSize)*512)
	for i, p := range []struct {
		typ         byte
		start, size uint32
	}{{0x0c, fakeBootStart, fakeBootSize}, {0x83, fakeRootStart, fakeRootSize}} {
		e := raw[446+16*i:]
		e[4] = p.typ
		binary.LittleEndian.PutUint32(e[8:], p.start)
		binary.LittleEndian.PutUint32(e[12:], p.size)
	}
	raw[510], raw[511] = 0x55, 0xaa
	copy(raw[fakeBootStart*512:], fat)
	copy(raw[fakeRootStart*512:], "RASPIROOT: the root file system")
	img := filepath.Join(dir, "fencegate-0-raspi-arm64.img")
	if err := os.WriteFile(img, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xz", "-0", "-T1", img).CombinedOutput(); err != nil {
		t.Fatalf("xz: %v\n%s", err, out)
	}
	xz := img + ".xz"
	b, err := os.ReadFile(xz)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(xz+".sha256", []byte(hex.EncodeToString(sum[:])+"  "+filepath.Base(xz)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return xz, raw
}

func mtools(t *testing.T, fat string, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], append([]string{"-i", fat}, args[1:]...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// qemuScript runs piimage/qemu.sh with args, HOME an empty folder of dir;
// it returns its stdout, stderr and exit status.
func qemuScript(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	cmd := exec.Command("bash", append([]string{"qemu.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CACHE_HOME=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("qemu.sh %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestQEMUScript: piimage/qemu.sh, the users' way to boot the image in
// QEMU, makes the card as the image test does (the image checked against
// its .sha256, padded to a power of two), puts the user's folder in the
// card's fencegate folder, and boots it with the image test's own QEMU
// command (qemuArgs, the same kernel files) but for the console: so the
// two cannot drift. The card is kept between runs, and made again with
// --new.
func TestQEMUScript(t *testing.T) {
	testenv.Program(t, "bash")
	dir := t.TempDir()
	xz, raw := fakeImage(t, dir, []byte("a device tree"))
	latest := filepath.Join(dir, "latest.img.xz") // as make image links it
	if err := os.Symlink(filepath.Base(xz), latest); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "my card folder")
	put(t, mine, "gateway.yaml", "id: greenhouse-1\n")
	put(t, mine, "keys/", "")
	put(t, mine, "keys/ctl.pub", signPub)
	put(t, dir, "passwd", "controller:pw\n")
	card := filepath.Join(dir, "a card, for QEMU.img") // a comma, which QEMU's -drive takes twice

	stdout, stderr, rc := qemuScript(t, dir, "--card", card, "--ssh-port", "2345", "--mqtt-port=2346",
		"--put", mine, "--put", filepath.Join(dir, "passwd"), "--print", latest)
	if rc != 0 {
		t.Fatalf("qemu.sh --print: exit %d\n%s", rc, stderr)
	}
	fat := fmt.Sprintf("%s@@%d", card, fakeBootStart*512)
	b := bootFiles(t, fat, card+".boot")
	want := append([]string{"qemu-system-aarch64"}, qemuArgs(b, card, 2345, 2346, "mon:stdio")...)
	if got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("qemu.sh's QEMU command is not the image test's (qemuArgs):\n got %q\nwant %q", got, want)
	}
	if filepath.Base(b.kernel) != fakeKernel {
		t.Errorf("the kernel booted is %s, want the card's newer %s", filepath.Base(b.kernel), fakeKernel)
	}

	st, err := os.Stat(card)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 32<<20 {
		t.Errorf("the card is %d bytes, want 32 MiB: the image's %d padded to a power of two", st.Size(), len(raw))
	}
	f, err := os.Open(card)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, st.Size())
	_, err = f.ReadAt(got, 0)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:512], raw[:512]) || !bytes.Equal(got[fakeRootStart*512:len(raw)], raw[fakeRootStart*512:]) || bytes.ContainsFunc(got[len(raw):], func(r rune) bool { return r != 0 }) {
		t.Errorf("the card's partition table, root partition or padding is not the image's")
	}
	for name, text := range map[string]string{"gateway.yaml": "id: greenhouse-1\n", "keys/ctl.pub": signPub, "passwd": "controller:pw\n", "README.txt": "the card's README\r\n"} {
		if out := mtools(t, fat, "mtype", "::fencegate/"+name); out != text {
			t.Errorf("the card's fencegate/%s reads %q, want %q", name, out, text)
		}
	}

	// Kept between runs, as a Pi keeps its card; --new makes it again.
	put(t, dir, "mark", "the Pi was here\n")
	mtools(t, fat, "mcopy", filepath.Join(dir, "mark"), "::fencegate/mark")
	if _, stderr, rc := qemuScript(t, dir, "--card", card, "--print", latest); rc != 0 {
		t.Fatalf("qemu.sh --print, again: exit %d\n%s", rc, stderr)
	}
	if !strings.Contains(mtools(t, fat, "mdir", "-b", "::fencegate"), "mark") {
		t.Errorf("a second run made the card again: it should boot the card as the Pi left it")
	}
	if _, stderr, rc := qemuScript(t, dir, "--card", card, "--new", "--no-boot", latest); rc != 0 {
		t.Fatalf("qemu.sh --new --no-boot: exit %d\n%s", rc, stderr)
	}
	if strings.Contains(mtools(t, fat, "mdir", "-b", "::fencegate"), "mark") {
		t.Errorf("--new did not make the card again from the image")
	}
}

// TestQEMUScriptRefuses: --help does nothing but print the usage, wherever
// it stands; a mistake in the arguments, a missing image or one that does
// not match its .sha256 is refused before anything is written.
func TestQEMUScriptRefuses(t *testing.T) {
	testenv.Program(t, "bash")
	if out, err := exec.Command("bash", "-n", "qemu.sh").CombinedOutput(); err != nil {
		t.Errorf("bash -n qemu.sh: %v\n%s", err, out)
	}
	if st, err := os.Stat("qemu.sh"); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("qemu.sh is not executable (%v)", err)
	}
	dir := t.TempDir()
	xz, _ := fakeImage(t, dir, nil)
	bad := filepath.Join(dir, "bad.img.xz")
	if err := os.Link(xz, bad); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bad+".sha256", []byte(strings.Repeat("0", 64)+"  bad.img.xz\n"), 0o644)
	card := filepath.Join(dir, "cards", "card.img")
	for _, c := range []struct {
		args []string
		rc   int
		say  string
	}{
		{[]string{"--help"}, 0, "Usage: piimage/qemu.sh [OPTION]... [IMAGE]"},
		{[]string{"-h"}, 0, "Usage: piimage/qemu.sh"},
		{[]string{"--new", "--card", card, "--put", dir, "--help", xz}, 0, "Usage: piimage/qemu.sh"},
		{[]string{"--help", "--no-such-option"}, 0, "Usage: piimage/qemu.sh"},
		{[]string{"--no-such-option", xz}, 2, "unknown option --no-such-option"},
		{[]string{"--card"}, 2, "--card needs a value"},
		{[]string{"--ssh-port", "22x", xz}, 2, "22x is not a port"},
		{[]string{"--mqtt-port", "70000", xz}, 2, "70000 is not a port"},
		{[]string{"--ssh-port", "2000", "--mqtt-port", "2000", xz}, 2, "the same port, 2000"},
		{[]string{"--put", filepath.Join(dir, "nothing"), xz}, 2, "no such file or folder"},
		{[]string{xz, xz}, 2, "one image only"},
		{[]string{"--card", card, filepath.Join(dir, "none.img.xz")}, 1, "no image at " + filepath.Join(dir, "none.img.xz") + ": build one with sudo make image"},
		{[]string{"--card", card, bad}, 1, "does not match " + bad + ".sha256"},
		{[]string{"--card", card, "--status"}, 1, "no card at " + card},
	} {
		stdout, stderr, rc := qemuScript(t, dir, c.args...)
		said := stderr
		if c.rc == 0 {
			said = stdout
			if stderr != "" {
				t.Errorf("qemu.sh %q said on stderr: %s", c.args, stderr)
			}
		}
		if rc != c.rc || !strings.Contains(said, c.say) {
			t.Errorf("qemu.sh %q: exit %d, said %q; want exit %d, saying %q", c.args, rc, said, c.rc, c.say)
		}
		if _, err := os.Stat(filepath.Dir(card)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("qemu.sh %q wrote %s", c.args, filepath.Dir(card))
			os.RemoveAll(filepath.Dir(card))
		}
		if es, _ := os.ReadDir(filepath.Join(dir, "home")); len(es) > 0 {
			t.Errorf("qemu.sh %q wrote in HOME: %s", c.args, es[0].Name())
		}
	}
}

// TestQEMUScriptBoots: qemu.sh starts QEMU's raspi3b with its command
// (QEMU takes the arguments, the console on the terminal, the ports
// forwarded) and runs it until it is stopped; a port that is taken is
// refused first. The kernel here is no kernel: that the image boots is
// the image test's.
func TestQEMUScriptBoots(t *testing.T) {
	testenv.Program(t, "bash")
	testenv.Program(t, "qemu-system-aarch64")
	dtc := testenv.Program(t, "dtc")
	cmd := exec.Command(dtc, "-I", "dts", "-O", "dtb")
	cmd.Stdin = strings.NewReader("/dts-v1/;\n/ { #address-cells = <1>; #size-cells = <1>; };\n")
	dtb, err := cmd.Output()
	if err != nil {
		t.Fatalf("dtc: %v", err)
	}
	dir := t.TempDir()
	xz, _ := fakeImage(t, dir, dtb)
	card := filepath.Join(dir, "card.img")
	ssh, mqtt := testenv.Port(t), testenv.Port(t)

	taken, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	takenPort := taken.Addr().(*net.TCPAddr).Port
	_, stderr, rc := qemuScript(t, dir, "--card", card, "--ssh-port", strconv.Itoa(takenPort), "--mqtt-port", strconv.Itoa(mqtt), xz)
	taken.Close()
	if rc != 1 || !strings.Contains(stderr, fmt.Sprintf("port %d is taken", takenPort)) {
		t.Errorf("qemu.sh with a taken port: exit %d, said %q; want it refused", rc, stderr)
	}
	if _, err := os.Stat(card); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("qemu.sh made the card before it refused the port (%v)", err)
	}

	q := exec.Command("bash", "qemu.sh", "--card", card, "--ssh-port", strconv.Itoa(ssh), "--mqtt-port", strconv.Itoa(mqtt), xz)
	q.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"))
	q.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out testenv.Buffer // read while qemu.sh writes it
	q.Stdout, q.Stderr = &out, &out
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Wait() }()
	defer func() {
		syscall.Kill(-q.Process.Pid, syscall.SIGKILL)
		<-done
	}()
	// Running once the forwarded SSH port answers (QEMU's, not the Pi's),
	// and still running a moment later.
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("qemu.sh ended (%v) before QEMU forwarded its ports:\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", ssh)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU did not forward port %d within a minute:\n%s", ssh, out.String())
		}
	}
	select {
	case err := <-done:
		done <- err
		t.Fatalf("QEMU ended (%v) with a card it should run with:\n%s", err, out.String())
	case <-time.After(2 * time.Second):
	}
	if !strings.Contains(out.String(), fmt.Sprintf("ssh -p %d root@127.0.0.1", ssh)) {
		t.Errorf("qemu.sh did not say where SSH is:\n%s", out.String())
	}
	t.Logf("qemu.sh said:\n%s", out.String())
}
