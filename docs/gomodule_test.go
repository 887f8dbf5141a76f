package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependOnTheModule runs controllers.md's block that makes a Go
// controller in a module of its own, outside this repository, depend on
// fencegate's (a replace to the checkout) and build it: a reader's first
// step to a controller of their own. It runs with this machine's Go
// module cache and proxy, in a temporary directory instead of
// /tmp/irrigation; the doctest harness skips the block, whose HOME has no
// module cache and whose network is loopback only.
func TestDependOnTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (-short)")
	}
	b, err := os.ReadFile("controllers.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "docs/gomodule_test.go runs this block"
	doc := string(b)
	i := strings.Index(doc, marker)
	if i < 0 {
		t.Fatalf("controllers.md has no block marked %q", marker)
	}
	start := strings.Index(doc[i:], "```sh\n")
	end := strings.Index(doc[i+start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("controllers.md: no sh block after the marker")
	}
	block := doc[i+start+6 : i+start+6+end]
	dir := t.TempDir()
	block = strings.ReplaceAll(block, "/tmp/irrigation", dir)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the block failed: %v\n%s\nblock:\n%s", err, out, block)
	}
	if _, err := os.Stat(filepath.Join(dir, "irrigation")); err != nil {
		t.Fatalf("no program built: %v\n%s", err, out)
	}
}
