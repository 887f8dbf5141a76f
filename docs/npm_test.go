//go:build linux

package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// npmOffline returns the environment in which a session's npm, which has
// no network, installs the Node-RED package as the docs install it (npm
// pack, then npm install of the package file, which fetches its
// dependencies): an npm cache that holds what that install fetches, filled
// here from the npm registry by the same two commands into a directory of
// the test's, and npm told to use nothing but that cache. The package is
// packed from repo's node-red/ as it is: what npm pack leaves out (its
// node_modules) cannot help the session's install. It skips t (fails it
// under CI) without the registry.
func npmOffline(t *testing.T, repo string) []string {
	t.Helper()
	npm := testenv.Program(t, "npm")
	cache, dir := filepath.Join(t.TempDir(), "npm-cache"), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_cache="+cache, "npm_config_fetch_retries=1")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			testenv.Need(t, false, "npm %s (which fills the npm cache that the docs' sessions install the Node-RED package from; they have no network): %v\n%s%s",
				strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	lines := strings.Fields(run("pack", "--pack-destination", dir, filepath.Join(repo, "node-red")))
	if len(lines) == 0 {
		t.Fatal("npm pack named no package file")
	}
	run("install", "--no-audit", "--no-fund", "--prefix", filepath.Join(dir, "nr"), filepath.Join(dir, lines[len(lines)-1]))
	return []string{"npm_config_cache=" + cache, "npm_config_offline=true"}
}
