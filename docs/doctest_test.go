//go:build linux

// Package docs_test runs the command examples of fencegate's documentation
// (README.md, docs/*.md, piemu/README.md) and checks their output, so that
// the docs cannot drift from what the code does.
//
// # What runs
//
// Every fenced code block with the info string sh is run, command by
// command, in one shell per file, as a reader would type it; a command may
// span lines (a trailing \, an open quote, a here-document). A foreground
// command must exit 0 within a few minutes.
//
// # Expected output
//
//   - Lines starting with # right below a command (no blank line between)
//     are its expected output: "# " is cut off. A comment after a blank
//     line, or at the end of a command's line, is for readers only.
//   - A ```text block right after an sh block (only blank lines between) is
//     the expected output of the whole block, unless <!-- doctest: not
//     output --> precedes it; <!-- doctest: output --> makes a text block
//     the expected output of the last sh block although prose comes between.
//   - Each expected line must appear, in order, in the output that arrived
//     since the command (or block) started: its own stdout and stderr and
//     that of the background terminals, such as a mosquitto_sub. Other lines
//     may come between. A line matches as a whole, trailing white space
//     ignored; … stands for any text. Each line is waited for up to 10 s.
//   - A last expected line "(exit N)" expects exit status N.
//
// # Directives
//
// HTML comments, which GitHub does not show. The first three stand
// directly before a code block (only blank lines between):
//
//	<!-- doctest: skip REASON -->          do not run this sh block (the reason is logged)
//	<!-- doctest: background wait-output="TEXT" -->
//	<!-- doctest: background wait-http=URL -->
//	                                       run this sh block in a terminal of its own that stays
//	                                       open; go on once a line of the session's output (any
//	                                       terminal's) contains TEXT, or once URL answers
//	<!-- doctest: not output -->           this text block is not expected output
//	<!-- doctest: output -->               this text block is the last sh block's expected output
//	<!-- doctest: run COMMAND -->          run a command readers do not see (set-up)
//	<!-- doctest: run background wait-output="TEXT" COMMAND -->
//	                                       the same in a terminal of its own (e.g. a gateway
//	                                       the examples talk to)
//	<!-- doctest: stop [COMMAND] -->       Ctrl-C the background terminals whose command
//	                                       starts with COMMAND (all without it)
//
// # Where it runs
//
// Each file runs in namespaces of its own (user, network with only
// loopback, mount, PID), so the docs' fixed ports (1883, 8080) and paths
// (~/.local/state, /tmp/...) are used verbatim and two test runs never meet:
// HOME is empty, /tmp is private, the repository is the working directory
// and writes to it (bin/, dist/) go to a throw-away overlay. A freshly built
// gateway is at bin/gateway, as make build leaves it (README.md's set-up,
// which the docs assume), and not on PATH: a doc that calls a bare gateway
// fails, as it would for a reader, except docs/raspberry-pi.md and
// docs/raspberry-pi-os.md, whose commands run where the Debian package
// installed /usr/bin/gateway, so it is on PATH there too. A doc's python3
// is one with paho-mqtt and cryptography (Debian's, where a pyenv python3
// comes first on PATH), and its node-red the one make clients installs in
// node-red/. Its npm installs from an npm cache that the test fills from
// the registry first (npmOffline). Files run in parallel. Without
// namespaces (or without mosquitto, curl, etcd, etcdctl, openssl,
// chromium, that python3, Node-RED or the npm registry where a file uses
// them) the test skips, and fails under CI=true. etcdutl, which Debian 12
// lacks, is built from tools/etcdutl when it is not installed.
package docs_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/tests/testenv"
)

// The environment of a session, set by the test that starts it.
const (
	envFile  = "FENCEGATE_DOCTEST_FILE"  // the Markdown file
	envRepo  = "FENCEGATE_DOCTEST_REPO"  // the repository root
	envDir   = "FENCEGATE_DOCTEST_DIR"   // the session's directory: tmp/ becomes /tmp
	envQuick = "FENCEGATE_DOCTEST_QUICK" // short time limits, for the harness's own tests
	envPy    = "FENCEGATE_DOCTEST_PY"    // the python3 the docs' python3 is (testenv.Python)
)

// Inside a session: its home, the directory with the gateway binary and
// the one with python3.
const (
	sessionHome = "/tmp/doctest/home"
	sessionBin  = "/tmp/doctest/bin"
	sessionPy   = "/tmp/doctest/python"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFile) != "" {
		os.Exit(sessionMain())
	}
	os.Exit(m.Run())
}

// sessionMain runs one file's session; it is PID 1 of its namespaces.
func sessionMain() int {
	out := json.NewEncoder(os.Stdout)
	file, repo, dir := os.Getenv(envFile), os.Getenv(envRepo), os.Getenv(envDir)
	text, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		out.Encode(event{"fail", err.Error()})
		return 1
	}
	d, err := parseDoc(file, string(text))
	if err != nil {
		out.Encode(event{"fail", err.Error()})
		return 1
	}
	var writable []string // the Go caches, shared with every build, and npm's (npmOffline)
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "npm_config_cache"} {
		if v := os.Getenv(k); filepath.IsAbs(v) {
			if _, err := os.Stat(v); err == nil {
				writable = append(writable, v)
			}
		}
	}
	if err := enterSandbox(repo, dir, writable); err != nil {
		out.Encode(event{"setup", "cannot isolate the docs' commands: " + err.Error()})
		return 0
	}
	if err := installBuilt(); err != nil {
		out.Encode(event{"fail", err.Error()})
		return 1
	}
	path := os.Getenv("PATH")
	if slices.Contains(installedDocs, file) {
		path = sessionBin + ":" + path
	}
	if py := os.Getenv(envPy); py != "" {
		// The docs' python3 is one with the Python package's dependencies,
		// as a reader who installed them has it, not one that shadows it.
		if err := os.MkdirAll(sessionPy, 0o755); err == nil {
			err = os.Symlink(py, filepath.Join(sessionPy, "python3"))
		}
		if err != nil {
			out.Encode(event{"fail", err.Error()})
			return 1
		}
		path = sessionPy + ":" + path
	}
	env := []string{"HOME=" + sessionHome, "PATH=" + path}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "FENCEGATE_DOCTEST_"), strings.HasPrefix(k, "XDG_"),
			k == "HOME", k == "PATH", k == "TMPDIR", k == "BASH_ENV", k == "ENV":
		default:
			env = append(env, kv)
		}
	}
	if os.Getenv(envQuick) != "" { // the harness's own tests
		lineWait, commandLimit, readyLimit, stopWait = time.Second, 2*time.Second, 3*time.Second, 2*time.Second
	}
	s := &session{doc: d, env: env, dir: repo, bash: "bash", log: newOutputLog(), out: out}
	s.run()
	return 0
}

// installedDocs are the docs whose commands run where the package
// installed the gateway as /usr/bin/gateway: they call it gateway.
var installedDocs = []string{"docs/raspberry-pi.md", "docs/raspberry-pi-os.md"}

// installBuilt puts the gateway the test built at bin/gateway in the
// session's view of the repository (the working directory), where make
// build leaves it, over any older one there.
func installBuilt() error {
	b, err := os.ReadFile(filepath.Join(sessionBin, "gateway"))
	if errors.Is(err, fs.ErrNotExist) { // the harness's own tests, without a gateway
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll("bin", 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join("bin", "gateway"), b, 0o755)
}

// docFiles are the Markdown files whose examples the test runs.
func docFiles(t *testing.T, repo string) []string {
	files := []string{"README.md", "piemu/README.md"}
	more, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, _ := filepath.Rel(repo, f)
		files = append(files, rel)
	}
	sort.Strings(files[2:])
	return files
}

// programs are the external programs the docs use, which a laptop may lack.
// etcdutl is built from tools/etcdutl if it is not installed (testenv.Etcdutl).
// python3 is one with paho-mqtt and cryptography (testenv.Python); node-red
// is the one the Node-RED package's dependencies installed (make clients).
var programs = []string{"mosquitto_pub", "mosquitto_sub", "mosquitto", "mosquitto_passwd", "curl", "etcd", "etcdctl", "etcdutl", "make", "openssl", "chromium",
	"python3", "node-red", "npm"}

// needs returns the programs of the list that a doc's runnable commands name.
func needs(d *doc) []string {
	var text strings.Builder
	for _, st := range d.steps {
		if st.kind == stepRun || st.kind == stepBackground {
			for _, c := range st.cmds {
				text.WriteString(c.text + "\n")
			}
		}
	}
	var list []string
	for _, p := range programs {
		if regexp.MustCompile(`(^|[\s;|&(])` + regexp.QuoteMeta(p) + `($|[\s;|&)])`).MatchString(text.String()) {
			list = append(list, p)
		}
	}
	return list
}

func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the docs' examples build and start gateways")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	type parsed struct {
		file string
		doc  *doc
	}
	var docs []parsed
	runnable := false
	for _, f := range docFiles(t, repo) {
		text, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseDoc(f, string(text))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		docs = append(docs, parsed{f, d})
		for _, st := range d.steps {
			runnable = runnable || st.kind != stepSkip
		}
	}
	if !runnable {
		return
	}
	testenv.Program(t, "bash")
	goBin := testenv.Program(t, "go")
	shared := t.TempDir()
	gateway := filepath.Join(shared, "gateway")
	// As make build builds it, so that the docs' make build and make sim
	// find every package in the build cache.
	build := exec.Command(goBin, "build", "-trimpath", "-buildvcs=auto", "-o", gateway, "./cmd/gateway")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	env := sessionEnv(t, goBin)
	t.Run("file", func(t *testing.T) {
		for _, p := range docs {
			t.Run(p.file, func(t *testing.T) {
				t.Parallel()
				run := false
				for _, st := range p.doc.steps {
					if st.kind == stepSkip {
						t.Logf("%s: skipped (%s): %s", st.pos, st.reason, firstLine(st.cmds[0].text))
					} else {
						run = true
					}
				}
				if !run {
					return
				}
				env := env
				for _, prog := range needs(p.doc) {
					switch prog {
					case "etcdutl":
						env = withPath(env, filepath.Dir(testenv.Etcdutl(t)))
					case "python3":
						env = append(env, envPy+"="+testenv.Python(t))
					case "node-red":
						env = withPath(env, testenv.NodeRED(t, repo))
					case "npm":
						env = append(env, npmOffline(t, repo)...)
					default:
						testenv.Program(t, prog)
					}
				}
				runSession(t, repo, p.file, gateway, env)
			})
		}
	})
}

// sessionEnv is the environment a session starts with: this one, with the
// Go tool's settings made explicit, since HOME will change under them.
func sessionEnv(t *testing.T, goBin string) []string {
	out, err := exec.Command(goBin, "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var goenv map[string]string
	if err := json.Unmarshal(out, &goenv); err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := os.Environ()
	for k, v := range goenv {
		env = append(env, k+"="+v)
	}
	// git, which go build asks for the commit, must not write to the real
	// repository's index.
	return append(env, "GIT_OPTIONAL_LOCKS=0")
}

// withPath returns env with dir at the front of its PATH.
func withPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := dir
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = dir + string(os.PathListSeparator) + v
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+path)
}

// runSession runs one file in its namespaces and reports what it says.
func runSession(t *testing.T, repo, file, gateway string, env []string) {
	began := time.Now()
	runIsolatedSession(t, repo, file, gateway, env, func(e event) {
		switch e.Kind {
		case "log":
			t.Log(e.Msg)
		case "fail":
			t.Error(e.Msg)
		}
	})
	t.Logf("%s: %.1fs", file, time.Since(began).Seconds())
}

// sessionLimit bounds a whole session, whatever it runs.
const sessionLimit = 15 * time.Minute

// runIsolatedSession runs the steps of repo/file in their namespaces, with gateway
// (if not "") first on PATH, and passes each event to each. It skips t
// (fails it under CI) if the namespaces cannot be made.
func runIsolatedSession(t *testing.T, repo, file, gateway string, env []string, each func(event)) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"ovl", "tmp" + sessionHome[len("/tmp"):], "tmp" + sessionBin[len("/tmp"):]} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if gateway != "" {
		bin := filepath.Join(dir, "tmp", sessionBin[len("/tmp"):], "gateway")
		if err := os.Link(gateway, bin); err != nil {
			data, err := os.ReadFile(gateway)
			if err == nil {
				err = os.WriteFile(bin, data, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := isolated(slices.Concat(env, []string{envFile + "=" + file, envRepo + "=" + repo, envDir + "=" + dir}))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	go func() { done <- runIsolated(cmd) }()
	limit := time.AfterFunc(sessionLimit, func() {
		if cmd.Process != nil {
			cmd.Process.Kill() // PID 1 of the namespace: everything in it dies
		}
	})
	defer limit.Stop()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	var setup string
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Errorf("session %s: %s", file, sc.Text())
			continue
		}
		if e.Kind == "setup" {
			setup = e.Msg
			continue
		}
		each(e)
	}
	err = <-done
	if setup == "" && err != nil && strings.Contains(err.Error(), "operation not permitted") {
		setup = fmt.Sprintf("cannot create namespaces for the docs' commands: %v", err)
	}
	if setup != "" {
		testenv.Need(t, false, "%s", setup)
	}
	if err != nil || stderr.Len() > 0 {
		t.Errorf("session %s: %v (after %v at most)\n%s", file, err, sessionLimit, stderr.String())
	}
}
