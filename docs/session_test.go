//go:build linux

package docs_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Time limits of a session.
var (
	lineWait     = 10 * time.Second // for each expected line
	commandLimit = 4 * time.Minute  // for a foreground command (a cold `make build` compiles everything)
	readyLimit   = 4 * time.Minute  // for a background terminal to be ready (a cold `make sim` too)
	stopWait     = 10 * time.Second // from SIGINT to SIGKILL
	maxFailures  = 5                // a session stops after this many failures
)

// A matcher matches one expected line against a line of output: the whole
// line, trailing white space ignored, with "…" standing for any text.
type matcher struct {
	want string
	re   *regexp.Regexp
}

func newMatcher(want string) matcher {
	want = strings.TrimRight(want, " \t\r")
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return matcher{want, regexp.MustCompile("^" + strings.Join(parts, "(?s:.*)") + "$")}
}

func (m matcher) match(got string) bool { return m.re.MatchString(strings.TrimRight(got, " \t\r")) }

// containing returns a matcher for a line that contains s.
func containing(s string) matcher {
	return newMatcher("…" + strings.ReplaceAll(s, "…", "") + "…")
}

// outputLog is a session's output, line by line, from its shell and its
// background terminals, in the order the lines arrived.
type outputLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced at each new line
}

func newOutputLog() *outputLog { return &outputLog{changed: make(chan struct{})} }

func (o *outputLog) add(line string) {
	o.mu.Lock()
	o.lines = append(o.lines, line)
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
}

// len returns the number of lines so far: where the output of a command
// that starts now begins.
func (o *outputLog) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lines)
}

// since returns the lines from index from on.
func (o *outputLog) since(from int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines[min(from, len(o.lines)):]...)
}

// find returns the index of the first line at or after from that m
// matches, waiting for new lines until deadline or until stop is closed.
func (o *outputLog) find(from int, m matcher, deadline time.Time, stop <-chan struct{}) (int, bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		o.mu.Lock()
		for ; from < len(o.lines); from++ {
			if m.match(o.lines[from]) {
				o.mu.Unlock()
				return from, true
			}
		}
		changed := o.changed
		o.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return from, false
		case <-stop:
			return from, false
		}
	}
}

// copyLines adds r's lines to the log until r ends, then closes done.
func (o *outputLog) copyLines(r io.Reader, done chan<- struct{}) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			o.add(strings.TrimSuffix(line, "\n"))
		}
		if err != nil {
			close(done)
			return
		}
	}
}

// event is one message from a session (the re-executed test binary in its
// namespaces) to the test that started it, as a JSON line on stdout.
type event struct {
	Kind string `json:"kind"` // log, fail, or setup (the session could not be set up)
	Msg  string `json:"msg"`
}

// session runs one file's steps, like a reader with a few terminals: one
// shell for the foreground commands and one terminal per background block.
type session struct {
	doc    *doc
	env    []string
	dir    string
	bash   string
	log    *outputLog
	out    *json.Encoder
	shell  *exec.Cmd
	stdin  io.WriteCloser
	status chan int // exit statuses from the shell, closed when it ends
	bg     []*bgJob
	fails  int
}

// bgJob is a background terminal: its own process group, so that a stop
// signals everything in it, as Ctrl-C does.
type bgJob struct {
	step   step
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // from Wait, once exited is closed
	output chan struct{}
	noted  bool // its end by itself was reported
}

func (s *session) emit(kind, format string, a ...any) {
	s.out.Encode(event{kind, fmt.Sprintf(format, a...)})
}

// errAbort ends a session early; the reason was reported.
var errAbort = errors.New("session aborted")

func (s *session) fail(format string, a ...any) error {
	s.emit("fail", format, a...)
	s.fails++
	if s.fails >= maxFailures {
		s.emit("fail", "%s: %d failures, the rest of the file was not run", s.doc.path, s.fails)
		return errAbort
	}
	return nil
}

// run runs every step of the doc and stops what is left running.
func (s *session) run() {
	defer s.close()
	if err := s.startShell(); err != nil {
		s.emit("fail", "%s: start the shell: %v", s.doc.path, err)
		return
	}
	for _, st := range s.doc.steps {
		s.noteEnded()
		var err error
		switch st.kind {
		case stepSkip:
			continue
		case stepRun:
			err = s.runBlock(st)
		case stepBackground:
			err = s.startBackground(st)
		case stepStop:
			if s.stop(st.match) == 0 {
				err = s.fail("%s: doctest: stop %s: no background terminal runs a command that starts with %q", st.pos, st.match, st.match)
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *session) startShell() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		return err
	}
	s.shell = exec.Command(s.bash, "--noprofile", "--norc")
	s.shell.Dir, s.shell.Env = s.dir, s.env
	s.shell.Stdout, s.shell.Stderr = w, w
	s.shell.ExtraFiles = []*os.File{sw}
	if s.stdin, err = s.shell.StdinPipe(); err != nil {
		return err
	}
	if err := s.shell.Start(); err != nil {
		return err
	}
	w.Close()
	sw.Close()
	go s.log.copyLines(r, make(chan struct{}))
	s.status = make(chan int)
	go func() {
		sc := bufio.NewScanner(sr)
		for sc.Scan() {
			n, _ := strconv.Atoi(sc.Text())
			s.status <- n
		}
		close(s.status)
	}()
	return nil
}

// show formats a command for a message, indented.
func show(c command, hidden bool) string {
	prefix := "    $ "
	if hidden {
		prefix = "    (hidden, from a directive) $ "
	}
	return prefix + strings.ReplaceAll(c.text, "\n", "\n      ")
}

// runBlock runs an sh block's commands (or a hidden command) in the shell,
// one after the other, and checks their output and exit statuses.
func (s *session) runBlock(st step) error {
	blockStart := s.log.len()
	blockWant, blockCode := wantExit(st.expect)
	for k, c := range st.cmds {
		start := s.log.len()
		began := time.Now()
		fmt.Fprintf(s.stdin, "{ %s\n} </dev/null 3>&-\necho $? >&3\n", c.text)
		var code int
		var ok bool
		select {
		case code, ok = <-s.status:
			if !ok {
				s.fail("%s: the shell ended during this command (a syntax error?)\n%s\n%s", c.pos, show(c, st.hidden), s.got(start, -1))
				return errAbort
			}
		case <-time.After(commandLimit):
			s.shell.Process.Kill() // and with it the session: later steps would build on this one
			s.fail("%s: still running after %v; a command that does not end needs <!-- doctest: background ... -->\n%s\n%s", c.pos, commandLimit, show(c, st.hidden), s.got(start, -1))
			return errAbort
		}
		want, wantCode := wantExit(c.expect)
		if k == len(st.cmds)-1 && blockCode != 0 {
			wantCode = blockCode
		}
		fails := s.fails
		if err := s.expect(c, st.hidden, want, start); err != nil {
			return err
		}
		if code != wantCode {
			hint := ""
			if wantCode == 0 {
				hint = fmt.Sprintf(" (if the doc means it, end its expected output with a line (exit %d))", code)
			}
			if err := s.fail("%s: exit status %d, want %d%s\n%s\n%s", c.pos, code, wantCode, hint, show(c, st.hidden), s.got(start, -1)); err != nil {
				return err
			}
		}
		if s.fails == fails {
			s.emit("log", "%s: ok in %.1fs: %s", c.pos, time.Since(began).Seconds(), firstLine(c.text))
		}
	}
	if len(blockWant) > 0 {
		return s.expect(command{pos: st.pos, text: blockText(st)}, st.hidden, blockWant, blockStart)
	}
	return nil
}

func blockText(st step) string {
	texts := make([]string, len(st.cmds))
	for k, c := range st.cmds {
		texts[k] = c.text
	}
	return strings.Join(texts, "\n")
}

func firstLine(s string) string {
	l, _, more := strings.Cut(s, "\n")
	if more {
		l += " …"
	}
	return l
}

// expect waits for the expected lines, in order, in the output since start.
func (s *session) expect(c command, hidden bool, want []expectLine, start int) error {
	from := start
	for k, e := range want {
		m := newMatcher(e.text)
		i, ok := s.log.find(from, m, time.Now().Add(lineWait), nil)
		if !ok {
			return s.fail("%s: expected output not seen within %v (line %d of %d; matched in order from where the command started)\n  command (%s):\n%s\n  want: %s\n%s\n%s%s",
				e.pos, lineWait, k+1, len(want), c.pos, show(c, hidden), e.text, closest(m, s.log.since(from)), s.got(start, from), s.noteEnded())
		}
		from = i + 1
	}
	return nil
}

// closest shows the output line most like the expected one, and where
// they part.
func closest(m matcher, lines []string) string {
	best, bestN := "", -1
	lit, _, _ := strings.Cut(m.want, "…")
	for _, l := range lines {
		n := commonPrefix(lit, l)
		if n > bestN {
			best, bestN = l, n
		}
	}
	if bestN < 0 {
		return "  got:  (no output after the lines already matched)"
	}
	return fmt.Sprintf("  got:  %s\n        %s^ closest line; it differs here (column %d)", best, strings.Repeat(" ", len([]rune(best[:bestN]))), len([]rune(best[:bestN]))+1)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// got shows the output since start, at most the last 40 lines. With
// searched >= 0 it marks with ">" the lines from there on, the ones an
// expected line was searched in.
func (s *session) got(start, searched int) string {
	lines := s.log.since(start)
	if len(lines) == 0 {
		return "  output since the command started: (none)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  output since the command started (%d lines", len(lines))
	if searched >= 0 {
		b.WriteString("; > marks those searched")
	}
	b.WriteString("):")
	first := 0
	if len(lines) > 40 {
		first = len(lines) - 40
		fmt.Fprintf(&b, "\n    (%d earlier lines)", first)
	}
	for i := first; i < len(lines); i++ {
		mark := " "
		if searched >= 0 && start+i >= searched {
			mark = ">"
		}
		fmt.Fprintf(&b, "\n   %s %s", mark, lines[i])
	}
	return b.String()
}

// noteEnded reports the background terminals that ended by themselves,
// and returns a line for each, for a failure message.
func (s *session) noteEnded() string {
	var b strings.Builder
	for _, j := range s.bg {
		select {
		case <-j.exited:
		default:
			continue
		}
		<-j.output
		c := j.step.cmds[0]
		msg := fmt.Sprintf("%s: the background terminal ended by itself (%v): %s", c.pos, exitStatus(j.err), firstLine(c.text))
		if !j.noted {
			s.emit("log", "%s", msg)
			j.noted = true
		}
		fmt.Fprintf(&b, "\n  note: %s", msg)
	}
	return b.String()
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// startBackground starts a block (or a hidden command) in a terminal of its
// own and waits until it is ready.
func (s *session) startBackground(st step) error {
	c := st.cmds[0]
	start := s.log.len()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	j := &bgJob{step: st, exited: make(chan struct{}), output: make(chan struct{})}
	j.cmd = exec.Command(s.bash, "--noprofile", "--norc", "-e", "-c", c.text)
	j.cmd.Dir, j.cmd.Env = s.dir, s.env
	j.cmd.Stdout, j.cmd.Stderr = w, w
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		w.Close()
		r.Close()
		s.fail("%s: start in the background: %v\n%s", c.pos, err, show(c, st.hidden))
		return errAbort
	}
	w.Close()
	go s.log.copyLines(r, j.output)
	go func() { j.err = j.cmd.Wait(); close(j.exited) }()
	s.bg = append(s.bg, j)
	began := time.Now()
	deadline := began.Add(readyLimit)
	switch {
	case st.wait.output != "":
		if _, ok := s.log.find(start, containing(st.wait.output), deadline, j.exited); !ok {
			return s.notReady(j, start)
		}
	case st.wait.http != "":
		client := &http.Client{Timeout: time.Second}
		for {
			resp, err := client.Get(st.wait.http)
			if err == nil {
				resp.Body.Close()
				break
			}
			select {
			case <-j.exited:
				return s.notReady(j, start)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return s.notReady(j, start)
			}
		}
	}
	select {
	case <-j.exited:
		return s.notReady(j, start)
	default:
	}
	s.emit("log", "%s: ready in %.1fs (background): %s", c.pos, time.Since(began).Seconds(), firstLine(c.text))
	want, _ := wantExit(append(append([]expectLine(nil), c.expect...), st.expect...))
	return s.expect(c, st.hidden, want, start)
}

func (s *session) notReady(j *bgJob, start int) error {
	c := j.step.cmds[0]
	what := fmt.Sprintf("not ready within %v (waited for %s)", readyLimit, j.step.wait)
	select {
	case <-j.exited:
		<-j.output
		what = fmt.Sprintf("ended before it was ready (%v; waited for %s)", j.err, j.step.wait)
	default:
	}
	s.fail("%s: background %s\n%s\n%s", c.pos, what, show(c, j.step.hidden), s.got(start, -1))
	return errAbort
}

// stop stops the background terminals whose first command starts with
// match (all for ""), as Ctrl-C does: SIGINT to the process group, then
// SIGKILL if it has not ended after stopWait. It returns how many it
// stopped.
func (s *session) stop(match string) int {
	var keep []*bgJob
	for _, j := range s.bg {
		if !strings.HasPrefix(j.step.cmds[0].text, match) {
			keep = append(keep, j)
			continue
		}
		pgid := j.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGINT)
		how := "stopped with SIGINT"
		select {
		case <-j.exited:
		case <-time.After(stopWait):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-j.exited
			how = fmt.Sprintf("did not end within %v of SIGINT: killed", stopWait)
		}
		syscall.Kill(-pgid, syscall.SIGKILL) // what it left behind
		s.emit("log", "%s: %s: %s", j.step.cmds[0].pos, how, firstLine(j.step.cmds[0].text))
	}
	n := len(s.bg) - len(keep)
	s.bg = keep
	return n
}

func (s *session) close() {
	s.stop("")
	if s.shell != nil && s.shell.Process != nil {
		s.stdin.Close()
		done := make(chan struct{})
		go func() { s.shell.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopWait):
			s.shell.Process.Kill()
			<-done
		}
	}
}
