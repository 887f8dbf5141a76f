//go:build linux

package docs_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMatcher(t *testing.T) {
	tests := []struct {
		want, got string
		ok        bool
	}{
		{`{"a":1}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":1}   `, true}, // trailing white space
		{`{"a":1}  `, `{"a":1}`, true},  // on either side
		{`{"a":1}`, ` {"a":1}`, false},  // leading white space counts
		{`{"a":1}`, `{"a":1} x`, false}, // the whole line
		{`{"a":1}`, `x {"a":1}`, false}, // the whole line
		{`a  b`, `a b`, false},          // white space inside counts
		{`"at":"…"}`, `"at":"2026-12-03T06:48:40Z"}`, true},
		{`"at":"…"}`, `"at":""}`, true}, // … may be empty
		{`… "stale" … exit 3`, `{"outcome":"stale"} exit 3`, false},
		{`…"stale"…exit 3`, `{"outcome":"stale"} exit 3`, true},
		{`…`, `anything`, true},
		{`a.b*c`, `a.b*c`, true}, // no regular expressions
		{`a.b*c`, `axbbbc`, false},
		{`(exit 3)`, `(exit 3)`, true},
	}
	for _, tt := range tests {
		if got := newMatcher(tt.want).match(tt.got); got != tt.ok {
			t.Errorf("newMatcher(%q).match(%q) = %v, want %v", tt.want, tt.got, got, tt.ok)
		}
	}
}

func TestOutputLogFindWaits(t *testing.T) {
	o := newOutputLog()
	o.add("one")
	go func() {
		time.Sleep(50 * time.Millisecond) // the line arrives while find waits
		o.add("two")
	}()
	if i, ok := o.find(0, newMatcher("two"), time.Now().Add(5*time.Second), nil); !ok || i != 1 {
		t.Errorf("find(two) = %d, %v; want 1, true", i, ok)
	}
	if i, ok := o.find(2, newMatcher("one"), time.Now().Add(50*time.Millisecond), nil); ok {
		t.Errorf("find(one) from 2 = %d, true; want not found (it came before)", i)
	}
}

// harnessRun runs md as a doc in a throw-away repository (returned) and
// returns the session's events as text.
func harnessRun(t *testing.T, md string) (logs, fails, repo string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the harness's tests start sessions")
	}
	repo = t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "doc.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	var l, f strings.Builder
	env := append(os.Environ(), envQuick+"=1")
	runIsolatedSession(t, repo, "doc.md", "", env, func(e event) {
		switch e.Kind {
		case "log":
			l.WriteString(e.Msg + "\n")
		case "fail":
			f.WriteString(e.Msg + "\n")
		}
	})
	return l.String(), f.String(), repo
}

// TestHarnessReportsFailures: a doc that does not match what its commands
// do fails, and the message names the place, the command, what was
// expected and what came.
func TestHarnessReportsFailures(t *testing.T) {
	t.Parallel()
	md := "# A doc\n" + // 1
		"\n" + // 2
		"```sh\n" + // 3
		"echo one two\n" + // 4
		"# one three\n" + // 5
		"false\n" + // 6
		"sh -c 'exit 3'\n" + // 7
		"# (exit 3)\n" + // 8
		"```\n" + // 9
		"<!-- doctest: stop make sim -->\n" + // 10
		"<!-- doctest: background wait-output=\"never printed\" -->\n" + // 11
		"```sh\n" + // 12
		"echo started; exit 1\n" + // 13
		"```\n" // 14
	_, fails, _ := harnessRun(t, md)
	for _, want := range []string{
		"doc.md:5: expected output not seen within 1s (line 1 of 1",
		"  command (doc.md:4):\n    $ echo one two\n",
		"  want: one three\n",
		"  got:  one two\n             ^ closest line; it differs here (column 6)\n",
		"doc.md:6: exit status 1, want 0 (if the doc means it, end its expected output with a line (exit 1))\n    $ false",
		"doc.md:13: background ended before it was ready (exit status 1; waited for a line containing \"never printed\")",
		"   started",
		"doc.md:10: doctest: stop make sim: no background terminal runs a command that starts with \"make sim\"",
	} {
		if !strings.Contains(fails, want) {
			t.Errorf("the failures do not contain %q; they are:\n%s", want, fails)
		}
	}
	if strings.Contains(fails, "doc.md:7") {
		t.Errorf("doc.md:7 expects (exit 3) and exits 3, but failed:\n%s", fails)
	}
}

// TestHarnessTimeLimit: a foreground command that does not end ends the
// session with a message that says what to do.
func TestHarnessTimeLimit(t *testing.T) {
	t.Parallel()
	_, fails, _ := harnessRun(t, "```sh\nsleep 600\necho not reached\n# not reached\n```\n")
	if !strings.Contains(fails, "doc.md:2: still running after 2s; a command that does not end needs <!-- doctest: background ... -->") {
		t.Errorf("failures:\n%s", fails)
	}
	if strings.Contains(fails, "not reached") {
		t.Errorf("the session went on after a command that did not end:\n%s", fails)
	}
}

// TestHarnessSessionPasses: a doc that matches passes, with a shell that
// keeps its state from command to command, background terminals, hidden
// commands and stops.
func TestHarnessSessionPasses(t *testing.T) {
	t.Parallel()
	md := "```sh\n" +
		"export GREETING=hello\n" +
		"cd /tmp\n" +
		"```\n" +
		"\n" +
		"```sh\n" +
		"echo \"$GREETING from $(pwd)\"\n" +
		"# hello from /tmp\n" +
		"```\n" +
		"<!-- doctest: run background wait-output=\"listening\" sh -c 'echo listening; while sleep 0.1; do :; done' -->\n" +
		"<!-- doctest: background wait-output=\"tick 2\" -->\n" +
		"```sh\n" +
		"for i in 1 2 3 4 5 6 7 8 9; do echo tick $i; sleep 0.1; done; sleep 600\n" +
		"```\n" +
		"```sh\n" +
		"true\n" +
		"# tick …\n" +
		"```\n" +
		"<!-- doctest: stop for i in -->\n" +
		"<!-- doctest: run test -d /tmp -->\n"
	logs, fails, _ := harnessRun(t, md)
	if fails != "" {
		t.Fatalf("failures:\n%s\nlog:\n%s", fails, logs)
	}
	for _, want := range []string{"doc.md:13: ready in", "doc.md:13: stopped with SIGINT: for i in", "doc.md:10: stopped with SIGINT: sh -c"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not contain %q:\n%s", want, logs)
		}
	}
}

// TestHarnessIsolation: the docs' commands see an empty HOME, a private
// /tmp, a network of their own, a read-only machine, a repository whose
// changes are thrown away; and nothing they start outlives the session.
func TestHarnessIsolation(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := fmt.Sprintf("doctest-probe-%d", time.Now().UnixNano())
	outsideTmp := filepath.Join(os.TempDir(), probe)
	md := "```sh\n" +
		"echo $HOME; ls -A $HOME | wc -l\n" +
		"# /tmp/doctest/home\n" +
		"# 0\n" +
		fmt.Sprintf("(echo > /dev/tcp/127.0.0.1/%d) 2>/dev/null && echo reached || echo isolated\n", port) +
		"# isolated\n" +
		"touch /usr/" + probe + " 2>/dev/null; echo \"exit $?\"\n" +
		"# exit 1\n" +
		"echo written > written.txt && cat written.txt\n" +
		"# written\n" +
		"touch /tmp/" + probe + "\n" +
		"(exec -a " + probe + " sleep 600) &\n" +
		"```\n"
	_, fails, repo := harnessRun(t, md)
	if fails != "" {
		t.Errorf("failures:\n%s", fails)
	}
	if _, err := os.Stat(outsideTmp); err == nil {
		os.Remove(outsideTmp)
		t.Errorf("%s was written to the real /tmp", outsideTmp)
	}
	if _, err := os.Stat("/usr/" + probe); err == nil {
		os.Remove("/usr/" + probe)
		t.Errorf("/usr/%s was written", probe)
	}
	if _, err := os.Stat(filepath.Join(repo, "written.txt")); err == nil {
		t.Errorf("written.txt, written in the session's overlay, appeared in the repository %s", repo)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), probe) {
			t.Errorf("%s (%q) outlived its session", p, b)
		}
	}
}
