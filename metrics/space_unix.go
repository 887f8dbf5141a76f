//go:build unix

package metrics

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// diskSpace returns the space an unprivileged user may still use on the
// file system of path's directory, and its size.
func diskSpace(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, nil
}
