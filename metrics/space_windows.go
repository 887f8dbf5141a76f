package metrics

import (
	"path/filepath"

	"golang.org/x/sys/windows"
)

// diskSpace returns the space the gateway's user may still use on the
// volume of path's directory, and its size.
func diskSpace(path string) (free, total uint64, err error) {
	dir, err := windows.UTF16PtrFromString(filepath.Dir(path))
	if err != nil {
		return 0, 0, err
	}
	var avail, size, all uint64
	if err := windows.GetDiskFreeSpaceEx(dir, &avail, &size, &all); err != nil {
		return 0, 0, err
	}
	return avail, size, nil
}
