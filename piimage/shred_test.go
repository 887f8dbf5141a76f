//go:build linux

package piimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// shredLib is the file bootconfig sources for shred_card_file.
const shredLib = "rootfs/usr/lib/fencegate-image/shred.sh"

// A fatDriver mounts a FAT image read-write on a directory. unmount
// unmounts it; abort ends a driver that hangs (fusefat spins on a
// truncation, say), so that what waits on the mount fails instead of
// waiting for go test's timeout. mount returns an unavailable error when
// this machine has no such driver.
type fatDriver struct {
	name  string
	mount func(t *testing.T, img, dir string) (unmount, abort func(), err error)
}

type unavailable struct{ why string }

func (u unavailable) Error() string { return u.why }

// errHung is run's error for a command it killed at its timeout.
var errHung = errors.New("still running at its timeout: killed")

// run runs a command with a timeout; at the timeout it kills its process
// group and returns errHung.
func run(timeout time.Duration, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return out.Bytes(), fmt.Errorf("%s, after %v: %w", name, timeout, errHung)
	}
}

// fatDrivers: Linux's own vfat, as on the Pi (loop device, the Pi's
// fstab's masks), and fusefat, a FAT in user space (FUSE), for kernels
// built without vfat, as the machines of this project's CI are. fusefat
// writes what it is given at once, so only vfat shows whether the
// overwrite was synced before the function returned.
var fatDrivers = []fatDriver{
	{"vfat", func(t *testing.T, img, dir string) (func(), func(), error) {
		out, err := run(time.Minute, "mount", "-t", "vfat", "-o", "loop,rw,fmask=0077,dmask=0077", img, dir)
		if err != nil {
			if fs, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(fs, []byte("\tvfat\n")) {
				return nil, nil, unavailable{fmt.Sprintf("this kernel has no vfat (mount: %s)", strings.TrimSpace(string(out)))}
			}
			return nil, nil, fmt.Errorf("mount -t vfat -o loop: %v: %s", err, out)
		}
		mounted := true
		t.Cleanup(func() {
			if mounted {
				run(time.Minute, "umount", "-l", dir)
			}
		})
		return func() {
				if out, err := run(time.Minute, "umount", dir); err != nil {
					t.Fatalf("umount %s: %v: %s", dir, err, out)
				}
				mounted = false
			}, func() {
				run(time.Minute, "umount", "-l", dir)
				mounted = false
			}, nil
	}},
	{"fusefat", func(t *testing.T, img, dir string) (func(), func(), error) {
		bin, err := exec.LookPath("fusefat")
		if err != nil {
			return nil, nil, unavailable{"fusefat is not installed (apt-get install fusefat)"}
		}
		if _, err := os.Stat("/dev/fuse"); err != nil {
			return nil, nil, unavailable{"no /dev/fuse"}
		}
		before, err := os.Stat(dir)
		if err != nil {
			return nil, nil, err
		}
		// -f: in the foreground, as this test's child, which it waits for.
		cmd := exec.Command(bin, "-f", "-o", "rw+", img, dir)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		abort := func() {
			cmd.Process.Kill()
			<-done
			run(time.Minute, "umount", "-l", dir)
		}
		t.Cleanup(func() {
			select {
			case <-done:
			default:
				run(10*time.Second, "umount", dir)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					abort()
				}
			}
		})
		// Mounted once the directory is another file system's root.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if after, err := os.Stat(dir); err == nil && !os.SameFile(before, after) {
				break
			}
			select {
			case <-done:
				return nil, nil, fmt.Errorf("fusefat ended before it mounted the image: %s", log.String())
			default:
			}
			if time.Now().After(deadline) {
				abort()
				return nil, nil, fmt.Errorf("fusefat did not mount the image within 10 s: %s", log.String())
			}
		}
		return func() {
			if out, err := run(30*time.Second, "umount", dir); err != nil {
				abort()
				t.Fatalf("umount %s: %v: %s", dir, err, out)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				abort()
				t.Fatalf("fusefat did not end within 10 s of the unmount: %s", log.String())
			}
		}, abort, nil
	}},
}

// TestShredCardFile: shred_card_file, which bootconfig runs on every file
// it takes off the card (passwd, broker.key, ...), leaves none of the
// file's bytes on the FAT file system, as a laptop (or dd | strings) reads
// it raw: not in the file's clusters, not in the slack past the file's end
// where the tail of a longer version an editor cut short in place lies;
// and they are on the image (the card) before the function returns, not
// only in the kernel's cache. A plain rm leaves them all (issue 33). Files
// it is not given are left as they were.
//
// It runs the real function on a FAT32 made as the image's boot partition
// is (build.sh), with the files written by mtools as a laptop writes them,
// mounted by Linux's vfat as on the Pi or, on a kernel without vfat, by
// fusefat. It needs root (mount); without root, or with neither driver,
// it skips, and fails under CI.
func TestShredCardFile(t *testing.T) {
	mkfs := testenv.Program(t, "mkfs.fat")
	testenv.Program(t, "mcopy")
	testenv.Need(t, os.Geteuid() == 0, "mounting a FAT image needs root")
	lib, err := filepath.Abs(shredLib)
	if err != nil {
		t.Fatal(err)
	}
	var why []string
	ran := 0
	for _, d := range fatDrivers {
		t.Run(d.name, func(t *testing.T) {
			tag := fmt.Sprintf("%x", rand.Uint64())
			// passwd as a laptop's editor may leave it: the new list, and
			// past its end, in the same cluster, the tail of the longer
			// list it replaced in place.
			newPW, oldPW := "Tr0ub4dor-and-3-horses-"+tag, "old-Tr0ub4dor-"+tag
			passwdNow := "# the controllers' accounts\ncontroller:" + newPW + "\n"
			passwdOld := "# the controllers' accounts (until May)\nold-controller:" + oldPW + "\n"
			// broker.key spans two of the card's 2 KiB clusters.
			keyHead, keyTail := "KEY-HEAD-"+tag, "KEY-TAIL-"+tag
			key := "-----BEGIN PRIVATE KEY-----\n" + keyHead + "\n" + strings.Repeat("MC4CAQAwBQYDK2VwBCIEIFq0aXlR3sZ8pHk2QvJ0\n", 80) + keyTail + "\n-----END PRIVATE KEY-----\n"
			// ca.crt is not given to shred_card_file: it stays as it was.
			caMark := "CA-CERT-" + tag
			ca := "-----BEGIN CERTIFICATE-----\n" + caMark + "\n-----END CERTIFICATE-----\n"

			dir := t.TempDir()
			img := filepath.Join(dir, "card.img")
			if out, err := exec.Command(mkfs, "-n", "RASPIFIRM", "-F", "32", "-S", "512", "-s", "4", "-C", img, "262144").CombinedOutput(); err != nil {
				t.Fatalf("mkfs.fat: %v\n%s", err, out)
			}
			fat := func(args ...string) {
				t.Helper()
				if out, err := exec.Command(args[0], append([]string{"-i", img}, args[1:]...)...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			fat("mmd", "::fencegate")
			for name, text := range map[string]string{"passwd": passwdNow + passwdOld, "broker.key": key, "ca.crt": ca} {
				src := filepath.Join(dir, name)
				if err := os.WriteFile(src, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				fat("mcopy", src, "::fencegate/"+name)
			}
			cutShort(t, img, "PASSWD     ", len(passwdNow))
			secrets := []string{newPW, oldPW, keyHead, keyTail}
			for _, s := range append(secrets, caMark) {
				if !imageHas(t, img, s) {
					t.Fatalf("%q is not in the image before shred_card_file: the test does not see what a laptop would", s)
				}
			}

			mnt := filepath.Join(dir, "mnt")
			os.Mkdir(mnt, 0o700)
			unmount, abort, err := d.mount(t, img, mnt)
			var u unavailable
			if errors.As(err, &u) {
				why = append(why, d.name+": "+u.why)
				t.Skip(u.why)
			}
			if err != nil {
				t.Fatal(err)
			}
			ran++
			folder := filepath.Join(mnt, find(t, mnt, "fencegate"))
			if got, err := os.ReadFile(filepath.Join(folder, find(t, folder, "passwd"))); err != nil || string(got) != passwdNow {
				t.Fatalf("passwd through %s: %q, %v; want %q (cut short as an editor leaves it)", d.name, got, err, passwdNow)
			}
			for _, name := range []string{"passwd", "broker.key"} {
				path := filepath.Join(folder, find(t, folder, name))
				out, err := run(30*time.Second, "sh", "-c", `. "$1" && shred_card_file "$2"`, "sh", lib, path)
				if errors.Is(err, errHung) {
					abort()
					t.Fatalf("shred_card_file %s: %v (%s hangs on what it did)", name, err, d.name)
				}
				if err != nil || len(out) > 0 {
					t.Errorf("shred_card_file %s: %v, said %q; want success, silent", name, err, out)
				}
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("%s is still in the folder after shred_card_file (%v)", name, err)
				}
			}
			if got, err := os.ReadFile(filepath.Join(folder, find(t, folder, "ca.crt"))); err != nil || string(got) != ca {
				t.Errorf("ca.crt, which shred_card_file was not given, reads %q, %v; want it as it was", got, err)
			}
			// Still mounted: what the function wrote is on the image, not
			// waiting in the kernel's cache for a later sync.
			for _, s := range secrets {
				if imageHas(t, img, s) {
					t.Errorf("%q is on the image after shred_card_file returned, the card still mounted (%s): the overwrite is not synced, or did not reach the file's clusters", s, d.name)
				}
			}
			unmount()
			for _, s := range secrets {
				if imageHas(t, img, s) {
					t.Errorf("%q is on the image after shred_card_file and the unmount (%s): a laptop reads it with strings", s, d.name)
				}
			}
			if !imageHas(t, img, caMark) {
				t.Errorf("ca.crt's content is gone from the image: shred_card_file reached a file it was not given")
			}
			if out, err := exec.Command("fsck.fat", "-n", img).CombinedOutput(); err != nil {
				t.Errorf("fsck.fat -n after shred_card_file (%s): %v\n%s", d.name, err, out)
			}
		})
	}
	if ran == 0 && len(why) > 0 {
		testenv.Need(t, false, "no FAT driver to mount the card's image with: %s", strings.Join(why, "; "))
	}
}

// find returns the name of dir's entry that is name but for case (fusefat
// shows 8.3 names in capitals).
func find(t *testing.T, dir, name string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.EqualFold(e.Name(), name) {
			return e.Name()
		}
	}
	t.Fatalf("no %s in %s", name, dir)
	return ""
}

// cutShort sets the size in the directory entry of the file whose 8.3
// name is short (11 bytes, padded) to size: the file's first cluster then
// holds, past its end, the rest of what was written, as when an editor
// rewrites a file shorter in place.
func cutShort(t *testing.T, img, short string, size int) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	i := indexIn(t, f, 0, -1, short)
	if i < 0 || i%32 != 0 || indexIn(t, f, i+1, -1, short) >= 0 {
		t.Fatalf("the image has no one directory entry %q (at %d)", short, i)
	}
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint32(nil, uint32(size)), i+28); err != nil {
		t.Fatal(err)
	}
}

// imageHas reports whether the image's bytes hold s, read raw.
func imageHas(t *testing.T, img, s string) bool {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return indexIn(t, f, 0, -1, s) >= 0
}

// indexIn returns where s first is in the n bytes of r from off (to the
// end if n is negative), read a MiB at a time, or -1.
func indexIn(t *testing.T, r io.ReaderAt, off, n int64, s string) int64 {
	t.Helper()
	const chunk = 1 << 20
	buf := make([]byte, chunk+len(s)-1)
	for pos := off; n < 0 || pos < off+n; pos += chunk {
		p := buf
		if n >= 0 && int64(len(p)) > off+n-pos {
			p = p[:off+n-pos]
		}
		m, err := r.ReadAt(p, pos)
		if i := bytes.Index(p[:m], []byte(s)); i >= 0 {
			return pos + int64(i)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return -1
}
