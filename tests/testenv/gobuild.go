package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// GoBuild builds a program with go build and args (flags, then the
// package) into out, a copy of its own. The link is kept at keep, in a
// directory that no other GoBuild uses for another program: a later
// test process of the same tree (a mutant's next run, a developer's next
// go test) finds keep up to date, and go build leaves it as it is instead
// of linking again, which takes seconds. The copy means a build that
// replaces keep never touches a file that a running program was started
// from. Builds into one directory take turns (a lock on it).
func GoBuild(keep, out string, args ...string) error {
	unlock, err := lockDir(filepath.Dir(keep))
	if err != nil {
		return err
	}
	defer unlock()
	b, err := exec.Command("go", append([]string{"build", "-o", keep}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %v: %v\n%s", args, err, b)
	}
	return copyFile(keep, out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
