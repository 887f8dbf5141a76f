package docs_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A doc is the runnable content of one Markdown file, in document order.
type doc struct {
	path  string
	steps []step
}

// stepKind says what a step does.
type stepKind int

const (
	stepRun        stepKind = iota // an sh block: its commands, one after the other, in the session's shell
	stepBackground                 // an sh block or a hidden command in a terminal of its own that stays open
	stepStop                       // stop background terminals, as Ctrl-C does
	stepSkip                       // an sh block that is not run, with the reason
)

// A step is one thing the session does.
type step struct {
	kind   stepKind
	pos    pos       // the block's opening fence, or the directive
	cmds   []command // stepRun: the commands; stepBackground: one command, the whole script
	expect []expectLine
	hidden bool // from a directive, not shown to readers
	wait   wait
	reason string // stepSkip: why
	match  string // stepStop: the start of the background terminals' first command, "" for all
}

// pos is a place in a file, printed as file:line.
type pos struct {
	file string
	line int
}

func (p pos) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// A command is what a reader types at one prompt: one line, or several
// joined by a trailing backslash, an open quote, a trailing pipe or && or ||,
// or a here-document.
type command struct {
	pos    pos
	text   string
	expect []expectLine // the `# ` lines right below it
}

// An expectLine is one line of expected output. "…" matches any text;
// "(exit N)" as the last line expects exit status N.
type expectLine struct {
	pos  pos
	text string
}

// wait is a background terminal's readiness condition.
type wait struct {
	output string // a line of its output contains this
	http   string // this URL answers
}

func (w wait) String() string {
	switch {
	case w.output != "":
		return fmt.Sprintf("a line containing %q", w.output)
	case w.http != "":
		return "an answer from " + w.http
	}
	return "nothing"
}

// directive is a parsed `<!-- doctest: ... -->` comment.
type directive struct {
	pos     pos
	verb    string // skip, not output, output, background, run, stop
	reason  string
	wait    wait
	bg      bool   // run background
	command string // run: the hidden command; stop: the prefix
}

var fenceRE = regexp.MustCompile("^( *)(```+|~~~+)[ \t]*([^ \t`]*)")

// parseDoc reads a Markdown file's runnable content. Its errors name the
// file and line and say how to fix it.
func parseDoc(path, text string) (*doc, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	d := &doc{path: path}
	var (
		pending   *directive // a directive waiting for its block
		lastSh    = -1       // index in d.steps of the last runnable sh block
		lastEnd   = -1       // line index of the last closing fence of a runnable sh block
		lastBlock = -1       // line index of the last closing fence of any block
	)
	blankSince := func(from, to int) bool { // lines from..to-1 are blank
		for i := from; i < to; i++ {
			if strings.TrimSpace(lines[i]) != "" {
				return false
			}
		}
		return true
	}
	pendingEnd := 0 // line index after the pending directive's comment
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "<!--") {
			start := i
			body := strings.TrimPrefix(trim, "<!--")
			for !strings.Contains(body, "-->") && i+1 < len(lines) {
				i++
				body += "\n" + strings.TrimSpace(lines[i])
			}
			end := strings.Index(body, "-->")
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: HTML comment without its closing -->", path, start+1)
			}
			body = strings.TrimSpace(body[:end])
			if !strings.HasPrefix(body, "doctest:") {
				continue
			}
			if pending != nil {
				return nil, fmt.Errorf("%s: directive %q is not directly before a code block (only blank lines may come between)", pending.pos, pending.verb)
			}
			dir, err := parseDirective(pos{path, start + 1}, strings.TrimSpace(strings.TrimPrefix(body, "doctest:")))
			if err != nil {
				return nil, err
			}
			switch dir.verb {
			case "run":
				st := step{kind: stepRun, pos: dir.pos, hidden: true, cmds: []command{{pos: dir.pos, text: dir.command}}}
				if dir.bg {
					st.kind, st.wait = stepBackground, dir.wait
				}
				d.steps = append(d.steps, st)
			case "stop":
				d.steps = append(d.steps, step{kind: stepStop, pos: dir.pos, hidden: true, match: dir.command})
			default:
				pending, pendingEnd = dir, i+1
			}
			continue
		}
		m := fenceRE.FindStringSubmatch(line)
		if m == nil {
			if pending != nil && trim != "" {
				return nil, fmt.Errorf("%s: directive %q is not directly before a code block (only blank lines may come between)", pending.pos, pending.verb)
			}
			continue
		}
		indent, marker, info := len(m[1]), m[2], m[3]
		open := i
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimLeft(lines[i], " ")
			if strings.HasPrefix(t, marker) && strings.TrimSpace(strings.TrimLeft(t, marker[:1])) == "" {
				closed = true
				break
			}
			body = append(body, dedent(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: code block without its closing %s", path, open+1, marker)
		}
		at := pos{path, open + 1}
		if info == "" {
			return nil, fmt.Errorf("%s: code block without a language: say `sh` for commands to run (the docs test runs them), `text` for output or pictures, or the format (yaml, json, conf)", at)
		}
		dir := pending
		if dir != nil && !blankSince(pendingEnd, open) {
			return nil, fmt.Errorf("%s: directive %q is not directly before a code block (only blank lines may come between)", dir.pos, dir.verb)
		}
		pending = nil
		switch info {
		case "sh":
			st := step{kind: stepRun, pos: at}
			switch {
			case dir == nil:
			case dir.verb == "skip":
				st.kind, st.reason = stepSkip, dir.reason
				st.cmds = []command{{pos: pos{path, open + 2}, text: strings.Join(body, "\n")}}
				d.steps = append(d.steps, st)
				lastSh, lastEnd, lastBlock = -1, -1, i
				continue
			case dir.verb == "background":
				st.kind, st.wait = stepBackground, dir.wait
			default:
				return nil, fmt.Errorf("%s: directive %q does not apply to an sh block (use skip or background)", dir.pos, dir.verb)
			}
			cmds, err := splitCommands(path, open+2, body)
			if err != nil {
				return nil, err
			}
			if len(cmds) == 0 {
				return nil, fmt.Errorf("%s: sh block without a command", at)
			}
			if st.kind == stepBackground {
				// One terminal runs the whole block, line after line.
				texts := make([]string, len(cmds))
				var expect []expectLine
				for k, c := range cmds {
					texts[k] = c.text
					expect = append(expect, c.expect...)
				}
				st.cmds = []command{{pos: cmds[0].pos, text: strings.Join(texts, "\n"), expect: expect}}
			} else {
				st.cmds = cmds
			}
			d.steps = append(d.steps, st)
			lastSh, lastEnd, lastBlock = len(d.steps)-1, i, i
		case "text":
			attach := false
			switch {
			case dir == nil:
				attach = lastSh >= 0 && lastEnd == lastBlock && blankSince(lastEnd+1, open)
			case dir.verb == "not output":
			case dir.verb == "output":
				if lastSh < 0 {
					return nil, fmt.Errorf("%s: directive \"output\": no runnable sh block before it", dir.pos)
				}
				attach = true
			default:
				return nil, fmt.Errorf("%s: directive %q does not apply to a text block (use output or not output)", dir.pos, dir.verb)
			}
			if attach {
				sh := &d.steps[lastSh]
				if len(sh.expect) > 0 {
					return nil, fmt.Errorf("%s: a second block of expected output for the sh block at %s", at, sh.pos)
				}
				for k, l := range body {
					if strings.TrimSpace(l) != "" {
						sh.expect = append(sh.expect, expectLine{pos{path, open + 2 + k}, l})
					}
				}
				if err := checkExit(sh.expect); err != nil {
					return nil, err
				}
			}
			lastBlock = i
		default:
			if dir != nil {
				return nil, fmt.Errorf("%s: directive %q before a %s block: directives apply to sh and text blocks", dir.pos, dir.verb, info)
			}
			lastBlock = i
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("%s: directive %q is not directly before a code block", pending.pos, pending.verb)
	}
	return d, nil
}

func dedent(line string, n int) string {
	for k := 0; k < n && strings.HasPrefix(line, " "); k++ {
		line = line[1:]
	}
	return line
}

var optRE = regexp.MustCompile(`^(wait-output|wait-http)=("(?:[^"\\]|\\.)*"|\S+)\s*`)

// parseDirective parses the text after "doctest:".
func parseDirective(at pos, s string) (*directive, error) {
	d := &directive{pos: at}
	word, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	options := func() error {
		for {
			m := optRE.FindStringSubmatch(rest)
			if m == nil {
				return nil
			}
			v := m[2]
			if strings.HasPrefix(v, `"`) {
				u, err := strconv.Unquote(v)
				if err != nil {
					return fmt.Errorf("%s: %s=%s: %v", at, m[1], v, err)
				}
				v = u
			}
			if m[1] == "wait-output" {
				d.wait.output = v
			} else {
				d.wait.http = v
			}
			rest = rest[len(m[0]):]
		}
	}
	switch {
	case word == "skip":
		if rest == "" {
			return nil, fmt.Errorf("%s: doctest: skip needs a reason, e.g. <!-- doctest: skip needs a Raspberry Pi -->", at)
		}
		d.verb, d.reason = "skip", rest
	case word == "not" && rest == "output":
		d.verb = "not output"
	case word == "output" && rest == "":
		d.verb = "output"
	case word == "background":
		d.verb = "background"
		if err := options(); err != nil {
			return nil, err
		}
		if rest != "" {
			return nil, fmt.Errorf("%s: doctest: background: unexpected %q (options: wait-output=\"TEXT\", wait-http=URL; for a hidden command use run background)", at, rest)
		}
	case word == "run":
		d.verb = "run"
		if w, r, _ := strings.Cut(rest, " "); w == "background" {
			d.bg, rest = true, strings.TrimSpace(r)
		}
		if err := options(); err != nil {
			return nil, err
		}
		if d.wait != (wait{}) && !d.bg {
			return nil, fmt.Errorf("%s: doctest: run: wait-output and wait-http need run background", at)
		}
		if rest == "" {
			return nil, fmt.Errorf("%s: doctest: run needs a command, e.g. <!-- doctest: run background wait-output=\"ready\" gateway sim -->", at)
		}
		d.command = rest
	case word == "stop":
		d.verb, d.command = "stop", rest
	default:
		return nil, fmt.Errorf("%s: unknown directive %q (want skip REASON, not output, output, background, run, stop)", at, s)
	}
	return d, nil
}

var exitRE = regexp.MustCompile(`^\(exit (\d+)\)$`)

// checkExit refuses an "(exit N)" line that is not the last expected line.
func checkExit(ex []expectLine) error {
	for k, e := range ex {
		if exitRE.MatchString(strings.TrimSpace(e.text)) && k != len(ex)-1 {
			return fmt.Errorf("%s: (exit N) must be the last expected line", e.pos)
		}
	}
	return nil
}

// wantExit splits the expected exit status off the expected lines.
func wantExit(ex []expectLine) ([]expectLine, int) {
	if n := len(ex); n > 0 {
		if m := exitRE.FindStringSubmatch(strings.TrimSpace(ex[n-1].text)); m != nil {
			code, _ := strconv.Atoi(m[1])
			return ex[:n-1], code
		}
	}
	return ex, 0
}

// splitCommands splits an sh block into commands. Lines starting with #
// right below a command (no blank line between) are its expected output;
// other comment lines and blank lines are for readers.
func splitCommands(file string, first int, body []string) ([]command, error) {
	var cmds []command
	afterCmd := false // the previous line ended a command or was one of its expected lines
	for k := 0; k < len(body); k++ {
		t := strings.TrimSpace(body[k])
		switch {
		case t == "":
			afterCmd = false
		case strings.HasPrefix(t, "#"):
			if afterCmd {
				c := &cmds[len(cmds)-1]
				c.expect = append(c.expect, expectLine{pos{file, first + k}, strings.TrimPrefix(strings.TrimPrefix(t, "#"), " ")})
				if err := checkExit(c.expect); err != nil {
					return nil, err
				}
			}
		default:
			start := k
			var sc shellScanner
			for {
				sc.line(body[k])
				if !sc.continues() {
					break
				}
				if k+1 == len(body) {
					return nil, fmt.Errorf("%s:%d: command does not end (%s) by the end of its block", file, first+start, sc.why())
				}
				k++
			}
			cmds = append(cmds, command{pos: pos{file, first + start}, text: strings.Join(body[start:k+1], "\n")})
			afterCmd = true
		}
	}
	return cmds, nil
}

// shellScanner follows just enough of the shell's syntax to tell where a
// command typed over several lines ends.
type shellScanner struct {
	single, double bool     // inside '…' or "…"
	heredocs       []string // delimiters of here-documents still to read
	inHeredoc      bool
	cont           bool // the last line ended with \, |, && or ||
}

var heredocRE = regexp.MustCompile(`<<-?\s*(?:'([^']+)'|"([^"]+)"|\\?([A-Za-z_][A-Za-z0-9_]*))`)

func (s *shellScanner) line(l string) {
	if s.inHeredoc {
		if strings.TrimLeft(l, "\t") == s.heredocs[0] {
			s.heredocs = s.heredocs[1:]
			s.inHeredoc = len(s.heredocs) > 0
		}
		return
	}
	s.cont = false
	code := []byte{} // the line without comments and quoted text
	plain := l       // the line without its comment
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case s.single:
			if c == '\'' {
				s.single = false
			}
		case s.double:
			if c == '\\' {
				i++
			} else if c == '"' {
				s.double = false
			}
		case c == '\\':
			if i == len(l)-1 {
				s.cont = true
			}
			i++
		case c == '\'':
			s.single = true
		case c == '"':
			s.double = true
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			plain, i = l[:i], len(l)
		default:
			code = append(code, c)
		}
	}
	if s.single || s.double {
		return
	}
	rest := strings.TrimSpace(string(code))
	for _, m := range heredocRE.FindAllStringSubmatch(plain, -1) {
		s.heredocs = append(s.heredocs, m[1]+m[2]+m[3])
	}
	s.inHeredoc = len(s.heredocs) > 0
	if strings.HasSuffix(rest, "|") || strings.HasSuffix(rest, "&&") {
		s.cont = true
	}
}

func (s *shellScanner) continues() bool { return s.single || s.double || s.inHeredoc || s.cont }

func (s *shellScanner) why() string {
	switch {
	case s.single:
		return "a ' is not closed"
	case s.double:
		return `a " is not closed`
	case s.inHeredoc:
		return "here-document without its " + s.heredocs[0] + " line"
	}
	return "the last line ends with \\, | or &&"
}
