package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every architecture Linux runs on today.
const userHZ = 100

// procUsage reads process pid's CPU time so far (user and system, all its
// threads) and its resident memory now and at its peak, from /proc.
func procUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'; utime and stime are the
	// 14th and 15th fields, the 12th and 13th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return usage{}, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return usage{}, fmt.Errorf("bench: /proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return usage{}, fmt.Errorf("bench: /proc/%d/stat: utime %q stime %q are not numbers", pid, f[11], f[12])
	}
	u := usage{CPU: time.Duration(utime+stime) * time.Second / userHZ, HaveCPU: true}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, nil
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		key, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.PeakRSS = kb << 10
		case "RssAnon":
			u.RSSAnon = kb << 10
		}
	}
	return u, nil
}

// dieWithParent makes the kernel stop the gateway process if the bench
// dies without stopping it (SIGKILL), so that no orphan keeps its store.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// fsType names the file system dir is on.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	switch uint32(st.Type) {
	case 0x01021994:
		return "tmpfs"
	case 0x858458f6:
		return "ramfs"
	case 0xef53:
		return "ext4"
	case 0x9123683e:
		return "btrfs"
	case 0x58465342:
		return "xfs"
	case 0xf2f52010:
		return "f2fs"
	case 0x4d44:
		return "vfat"
	case 0x2011bab0:
		return "exfat"
	case 0x6969:
		return "nfs"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	}
	return fmt.Sprintf("file system 0x%x", uint32(st.Type))
}
