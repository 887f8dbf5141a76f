package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testenv"
)

// sysEvent is one system call as strace saw it. A call that strace printed
// in two parts (unfinished, then resumed, because another thread's call
// came between) is two events: its entry where it began and its exit where
// it returned. A call printed whole is both at once.
type sysEvent struct {
	n     int    // position in the trace
	pid   int    // thread
	name  string // system call
	args  string // its arguments as printed (whole, also for the exit of a resumed call)
	ret   string // return value ("" at an entry)
	entry bool   // the call began here
	exit  bool   // the call returned here
}

// fd returns the call's first argument as a file descriptor (-1 if it is not one).
func (e sysEvent) fd() int {
	a, _, _ := strings.Cut(e.args, ",")
	n, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil {
		return -1
	}
	return n
}

// ok reports whether the call returned without an error.
func (e sysEvent) ok() bool { return e.exit && !strings.HasPrefix(e.ret, "-1") && e.ret != "?" }

var (
	reWhole    = regexp.MustCompile(`^(\d+)\s+([a-z0-9_]+)\((.*)\)\s+= (.*)$`)
	reStart    = regexp.MustCompile(`^(\d+)\s+([a-z0-9_]+)\((.*) <unfinished \.\.\.>$`)
	reResumed  = regexp.MustCompile(`^(\d+)\s+<\.\.\. ([a-z0-9_]+) resumed>(.*)\)\s+= (.*)$`)
	reNoReturn = regexp.MustCompile(`^(\d+)\s+<\.\.\. ([a-z0-9_]+) resumed>`)
)

// parseStrace reads the output of strace -f -o FILE (one line per call,
// each starting with the thread id).
func parseStrace(t *testing.T, path string) []sysEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []sysEvent
	started := map[int]sysEvent{} // per thread: a call that began and has not returned
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		switch m := reWhole.FindStringSubmatch(line); {
		case m != nil:
			evs = append(evs, sysEvent{n: len(evs), pid: atoi(m[1]), name: m[2], args: m[3], ret: m[4], entry: true, exit: true})
			continue
		}
		if m := reStart.FindStringSubmatch(line); m != nil {
			e := sysEvent{n: len(evs), pid: atoi(m[1]), name: m[2], args: m[3], entry: true}
			started[e.pid] = e
			evs = append(evs, e)
			continue
		}
		if m := reResumed.FindStringSubmatch(line); m != nil {
			pid := atoi(m[1])
			e := started[pid]
			delete(started, pid)
			evs = append(evs, sysEvent{n: len(evs), pid: pid, name: m[2], args: e.args + m[3], ret: m[4], exit: true})
			continue
		}
		if m := reNoReturn.FindStringSubmatch(line); m != nil {
			delete(started, atoi(m[1])) // ") = ?": the process was killed in the call
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// fileTracker follows which file each descriptor names, through openat and
// close, as the events are read in order.
type fileTracker map[int]string

var reOpenat = regexp.MustCompile(`^AT_FDCWD, "((?:[^"\\]|\\.)*)", ([A-Z_|]+)`)

// see updates the tracker with e; it returns the path e opened, if it opened one.
func (ft fileTracker) see(e sysEvent) string {
	switch {
	case e.name == "openat" && e.ok():
		m := reOpenat.FindStringSubmatch(e.args)
		fd, err := strconv.Atoi(strings.Fields(e.ret)[0])
		if m == nil || err != nil {
			return ""
		}
		ft[fd] = m[1]
		return m[1]
	case e.name == "close" && e.entry:
		delete(ft, e.fd())
	}
	return ""
}

// openFlags returns the flags of an openat event ("" if it is not one).
func openFlags(e sysEvent) string {
	if m := reOpenat.FindStringSubmatch(e.args); e.name == "openat" && m != nil {
		return m[2]
	}
	return ""
}

// isSync reports a completed fsync or fdatasync.
func isSync(e sysEvent) bool { return (e.name == "fdatasync" || e.name == "fsync") && e.ok() }

// needStrace returns the path of strace once it has traced a program
// here; it skips t (fails it under CI) if strace is missing or may not
// trace (ptrace or seccomp refused in a container).
func needStrace(t *testing.T) string {
	t.Helper()
	bin := testenv.Program(t, "strace")
	out, err := exec.Command(bin, "-f", "--seccomp-bpf", "-qq", "-o", os.DevNull, "-e", "trace=fsync", "true").CombinedOutput()
	testenv.Need(t, err == nil, "strace cannot trace here: %v: %s", err, out)
	return bin
}

// straceCmd returns the arguments that run the gateway binary with args
// under strace, following every thread, writing the trace to out and
// stopping only at the calls named (seccomp-bpf keeps the others at full
// speed).
func straceCmd(t *testing.T, out string, calls []string, args ...string) []string {
	return append([]string{"-f", "--seccomp-bpf", "-qq", "-e", "signal=none", "-s", "4096", "-o", out,
		"-e", "trace=" + strings.Join(calls, ","), binary}, args...)
}

func describe(evs []sysEvent, from, to int) string {
	var b strings.Builder
	for _, e := range evs[max(from, 0):min(to, len(evs))] {
		args := e.args
		if len(args) > 120 {
			args = args[:120] + "…"
		}
		fmt.Fprintf(&b, "  %d %s(%s) = %s\n", e.pid, e.name, args, e.ret)
	}
	return b.String()
}
