package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// TestMakeBuildStampsVersion: `make build` stamps the commit into the
// binary, so `gateway version` names it instead of "(devel)". GOFLAGS
// says -buildvcs=false, as some environments do: the Makefile's own flag
// must win.
func TestMakeBuildStampsVersion(t *testing.T) {
	mk := testenv.Program(t, "make")
	git := testenv.Program(t, "git")
	root := repoRoot(t)
	head, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").Output()
	testenv.Need(t, err == nil, "%s is not a git checkout (git rev-parse HEAD: %v)", root, err)
	dir := root
	if !goStamps(root) {
		dir = cloneWithMakefile(t, git, root)
	}

	bin := filepath.Join(t.TempDir(), "gateway")
	cmd := exec.Command(mk, "-C", dir, "build", "BIN="+bin)
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build BIN=%s: %v\n%s", bin, err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("gateway version: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	t.Logf("gateway version: %s", got)

	// Go derives the version from the commit: the tag on a tagged commit,
	// else a pseudo-version that ends in the commit's first 12 hex digits.
	want := string(head[:12])
	if tag, err := exec.Command(git, "-C", root, "describe", "--tags", "--exact-match", "HEAD").Output(); err == nil {
		want = strings.TrimSpace(string(tag))
	}
	if strings.Contains(got, "(devel)") || !strings.HasPrefix(got, "fencegate gateway ") || !strings.Contains(got, want) {
		t.Errorf("gateway version = %q; want %q stamped by make build (-buildvcs)", got, want)
	}
}

// goStamps reports whether `go build` can stamp the commit of the checkout
// at root: Go recognises a repository only by a .git directory, so in a
// linked git worktree, whose .git is a file, it stamps nothing
// (golang/go#58218).
func goStamps(root string) bool {
	fi, err := os.Stat(filepath.Join(root, ".git"))
	return err == nil && fi.IsDir()
}

// cloneWithMakefile clones the commit checked out at root into a temporary
// directory, where Go can stamp it, and puts root's Makefile into the
// clone, so that the Makefile under test is the working copy's.
func cloneWithMakefile(t *testing.T, git, root string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	run(t, git, "clone", "--quiet", "--shared", root, dir)
	mf, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), mf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is a linked git worktree, in which Go stamps no commit (golang/go#58218): building in a clone of HEAD with its Makefile", root)
	return dir
}
