package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"github.com/fencegate/fencegate/tests/testenv"
)

// isolated returns the command that runs this test binary as a session in
// namespaces of its own: a user namespace (we are root in it), a network
// namespace with only loopback, a mount namespace (a private /tmp and a
// copy-on-write view of the repository) and a PID namespace (the session is
// PID 1; when it ends, the kernel kills everything it left).
func isolated(env []string) *exec.Cmd {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	return cmd
}

// runIsolated starts cmd and waits for it on one locked OS thread: the
// parent-death signal follows the thread that started the child.
func runIsolated(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Wait()
}

// enterSandbox sets up the session's view of the machine, inside the
// namespaces: every file system read-only (as root of the user namespace,
// a test run by root could otherwise write anywhere, /var/lib/fencegate
// included), except the Go caches in writable, the repository at its own
// path as an overlay whose writes go to a tmpfs, dir/tmp as /tmp, a fresh
// /proc, and loopback up.
func enterSandbox(repo, dir string, writable []string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The repository and the caches stay in sight when dir/tmp becomes
	// /tmp: those under /tmp are bound into dir/tmp at the same place.
	var inTmp [][2]string
	for _, p := range append([]string{repo}, writable...) {
		if rel, ok := strings.CutPrefix(p, "/tmp/"); ok {
			in := filepath.Join(dir, "tmp", rel)
			if err := os.MkdirAll(in, 0o755); err != nil {
				return err
			}
			inTmp = append(inTmp, [2]string{p, in})
		}
	}
	if err := readOnlyTree("/"); err != nil {
		return fmt.Errorf("make / read-only (needs Linux 5.12 or later): %w", err)
	}
	for _, w := range writable {
		if err := bindWritable(w, w); err != nil {
			return err
		}
	}
	ovl := filepath.Join(dir, "ovl")
	if err := syscall.Mount("tmpfs", ovl, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", ovl, err)
	}
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(ovl, d), 0o755); err != nil {
			return err
		}
	}
	if strings.ContainsAny(repo, ",:") {
		return fmt.Errorf("the repository path %s has a comma or colon, which overlayfs options cannot hold", repo)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/upper,workdir=%s/work", repo, ovl, ovl)
	if err := syscall.Mount("overlay", repo, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s (needs Linux 5.11 or later in a user namespace): %w", repo, err)
	}
	for _, b := range inTmp {
		if err := syscall.Mount(b[0], b[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s into the new /tmp: %w", b[0], err)
		}
	}
	if err := bindWritable(filepath.Join(dir, "tmp"), "/tmp"); err != nil {
		return err
	}
	// A /proc of this PID namespace; the old one still works if this fails.
	syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
	if err := os.Chdir(repo); err != nil { // the overlay, not the directory under it
		return err
	}
	return testenv.LoopbackUp()
}

// readOnlyTree makes the mount at path and every mount below it read-only
// (mount_setattr with AT_RECURSIVE; the syscall has the same number on
// every architecture).
func readOnlyTree(path string) error {
	const (
		sysMountSetattr = 442
		atFDCWD         = -100
		atRecursive     = 0x8000
		mountAttrRDONLY = 0x1
	)
	attr := struct{ set, clr, propagation, userns uint64 }{set: mountAttrRDONLY}
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	fd := atFDCWD
	_, _, e := syscall.Syscall6(sysMountSetattr, uintptr(fd), uintptr(unsafe.Pointer(p)), atRecursive, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return e
	}
	return nil
}

// bindWritable mounts src, and the mounts below it, at dst, writable.
func bindWritable(src, dst string) error {
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if err := syscall.Mount("", dst, "", syscall.MS_REMOUNT|syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("make %s writable: %w", dst, err)
	}
	return nil
}
