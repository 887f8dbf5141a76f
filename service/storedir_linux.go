//go:build linux

package service

import (
	"fmt"
	"syscall"
)

// Filesystems that hold no files of their own (statfs f_type).
var pseudoFS = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x1cd1:     "devpts",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0xcafe4a11: "bpf",
	0x62656570: "configfs",
	0x65735543: "fusectl",
	0x6165676c: "pstore",
	0xde5e81e4: "efivarfs",
}

// Filesystems in memory.
var memFS = map[int64]string{
	0x01021994: "tmpfs",
	0x858458f6: "ramfs",
}

func fsType(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}

func unfitFilesystem(dir string) string {
	t, err := fsType(dir)
	if err != nil {
		return fmt.Sprintf("a filesystem that cannot be examined (%v)", err)
	}
	if name, ok := pseudoFS[t]; ok {
		return name + ", which is not a real filesystem"
	}
	return ""
}

func volatileFilesystem(dir string) string {
	t, err := fsType(dir)
	if err != nil {
		return ""
	}
	return memFS[t]
}

func writable(dir string) error { return syscall.Access(dir, 2 /* W_OK */) }
