package config

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAML syntax errors. yaml.v3 names the line where the construct around
// the problem starts, often the line before the culprit, one less than it
// for parser errors, or no line at all when that is the first one; and its
// messages ("did not find expected key") do not say what to change. The
// culprit is found from the text instead: an unclosed quote or bracket is
// where it opens; anything else is on the first line at which the text up
// to it no longer parses (with open quotes and brackets closed there).

var yamlError = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxError explains yaml.v3's syntax error err in src.
func syntaxError(src []byte, err error) error {
	m := yamlError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	raw := m[2]
	why := " (yaml: " + raw + ")"
	t := scanText(string(src))
	switch {
	case strings.HasPrefix(raw, "exceeded max depth"):
		k, _ := t.firstFailing()
		return problem{k, "lists and mappings are nested too deep here: look for a [ or { that is never closed" + why}
	case strings.HasPrefix(raw, "unknown anchor"):
		k, _ := t.firstFailing()
		return problem{k, "an alias (*name) here refers to no anchor (&name) above it: an anchor must come before its aliases" + why}
	}
	if line, msg := t.unclosed(raw); line > 0 {
		return problem{line, msg + why}
	}
	if k, kraw := t.firstFailing(); k > 0 {
		return problem{k, t.explain(k, kraw) + why}
	}
	line, _ := strconv.Atoi(m[1])
	if line == 0 {
		return problem{0, "not valid YAML: check the indentation and punctuation of the first lines" + why}
	}
	return problem{line, "this line, or the one below it, is not valid YAML: check their indentation and punctuation" + why}
}

// An opener is an open quote or flow collection ([ or {).
type opener struct {
	ch   byte
	line int
}

// text is a document split into lines, with what a scan found in each.
type text struct {
	lines []string
	// open is, per line, what is open at its end: flow collections from
	// the outermost, then a quote.
	open [][]opener
	// inside is, per line, whether it continues a quoted or block scalar
	// or a flow collection from the lines above: it has no indentation of
	// its own.
	inside []bool
	// comment is, per line, where its comment starts (its length if none).
	comment []int
}

// lineBreaks turns YAML's line breaks into \n.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

var blockHeader = regexp.MustCompile(`(?:^\s*|:\s+|-\s+)[|>][-+1-9]*\s*$`)

// scanText finds quotes, flow collections, comments and block scalars,
// roughly as the YAML scanner does: a quote or bracket only opens where a
// value starts (not inside "it's" or "a[1]").
func scanText(src string) *text {
	t := &text{lines: strings.Split(lineBreaks.Replace(src), "\n")}
	var flows []opener
	var quote *opener
	block := -1 // a block scalar's lines are indented more than this
	for i, l := range t.lines {
		t.inside = append(t.inside, quote != nil || len(flows) > 0)
		t.comment = append(t.comment, len(l))
		if block >= 0 && (strings.TrimSpace(l) == "" || indentOf(l) > block) {
			t.inside[i] = true
			t.open = append(t.open, nil)
			continue
		}
		block = -1
		start := true // a value may start here
	chars:
		for j := 0; j < len(l); j++ {
			ch := l[j]
			if quote != nil {
				switch {
				case quote.ch == '"' && ch == '\\':
					j++
				case ch == quote.ch && ch == '\'' && j+1 < len(l) && l[j+1] == '\'':
					j++
				case ch == quote.ch:
					quote, start = nil, false
				}
				continue
			}
			blankAfter := j+1 == len(l) || l[j+1] == ' ' || l[j+1] == '\t'
			switch ch {
			case ' ', '\t':
			case '#':
				if j == 0 || l[j-1] == ' ' || l[j-1] == '\t' {
					t.comment[i] = j
					break chars
				}
				start = false
			case '"', '\'':
				if start {
					quote = &opener{ch, i + 1}
				}
				start = false
			case '[', '{':
				if start || len(flows) > 0 {
					flows = append(flows, opener{ch, i + 1})
					start = true
				} else {
					start = false
				}
			case ']', '}':
				if len(flows) > 0 {
					flows = flows[:len(flows)-1]
				}
				start = false
			case ',':
				start = len(flows) > 0
			case '-', '?':
				start = start && len(flows) == 0 && blankAfter
			case ':':
				start = len(flows) > 0 || blankAfter
			default:
				start = false
			}
		}
		open := append([]opener(nil), flows...)
		if quote != nil {
			open = append(open, *quote)
		}
		t.open = append(t.open, open)
		if len(open) == 0 && blockHeader.MatchString(l[:t.comment[i]]) {
			li := parseLine(l)
			block = li.col
			if strings.HasPrefix(li.content, "|") || strings.HasPrefix(li.content, ">") {
				block = li.indent
			}
		}
	}
	return t
}

// unclosed returns the line of a quote or flow collection that is never
// closed and what to do, or 0.
func (t *text) unclosed(raw string) (int, string) {
	open := t.open[len(t.open)-1]
	if len(open) == 0 {
		return 0, ""
	}
	o := open[len(open)-1]
	if o.ch == '"' || o.ch == '\'' {
		if !strings.Contains(raw, "end of stream") {
			return 0, ""
		}
		return o.line, fmt.Sprintf("the %c opened here is never closed: add the closing %c at the end of the value", o.ch, o.ch)
	}
	if !strings.Contains(raw, "did not find expected ','") && !strings.Contains(raw, "end of stream") {
		return 0, ""
	}
	what := "list"
	if o.ch == '{' {
		what = "mapping"
	}
	return o.line, fmt.Sprintf("the %q opened here is never closed: add %q where the %s ends", string(o.ch), closers(open), what)
}

// closers returns what closes the open quote and collections, innermost
// first.
func closers(open []opener) string {
	var b strings.Builder
	for i := len(open) - 1; i >= 0; i-- {
		switch c := open[i].ch; c {
		case '[':
			b.WriteByte(']')
		case '{':
			b.WriteByte('}')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// firstFailing returns the first line k at which the document, cut after
// it (line k without its comment, and with what is open closed), no
// longer parses, and yaml.v3's message for that; 0 if there is none. Once
// a cut parses no longer, no longer cut does, so a binary search finds it.
func (t *text) firstFailing() (int, string) {
	fails := func(k int) error {
		return parses(strings.Join(t.lines[:k-1], "\n") + "\n" + t.lines[k-1][:t.comment[k-1]] + closers(t.open[k-1]))
	}
	lo, hi := 0, len(t.lines) // the cut after lo lines parses, after hi not
	err := fails(hi)
	if err == nil {
		return 0, ""
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if e := fails(mid); e != nil {
			hi, err = mid, e
		} else {
			lo = mid
		}
	}
	if m := yamlError.FindStringSubmatch(err.Error()); m != nil {
		return hi, m[2]
	}
	return hi, err.Error()
}

// parses parses every document in s.
func parses(s string) error {
	dec := yaml.NewDecoder(strings.NewReader(s))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// explain says what is wrong with line k, the culprit of yaml.v3's
// message raw, and how to fix it.
func (t *text) explain(k int, raw string) string {
	l := t.lines[k-1]
	li := parseLine(l[:t.comment[k-1]])
	switch {
	case tabIndent(l):
		return "this line is indented with a tab; YAML does not allow tabs for indentation: use spaces"
	case strings.Contains(raw, "could not find expected ':'"):
		return fmt.Sprintf("%q has no \":\" after it: write %q if it is a key", li.content, li.content+":")
	case strings.Contains(raw, "cannot start any token"):
		v := li.content
		if li.key != "" {
			v = li.rest
		}
		if v != "" && strings.ContainsRune("@`%", rune(v[0])) {
			example := strconv.Quote(v)
			if li.key != "" {
				example = li.key + ": " + example
			}
			return fmt.Sprintf("a value cannot start with %q in YAML: put it in quotes, e.g. %s", v[:1], example)
		}
	case strings.Contains(raw, "did not find expected ',' or"):
		if k > 1 && len(t.open[k-2]) > 0 {
			o := t.open[k-2][len(t.open[k-2])-1]
			return fmt.Sprintf("a \",\" is missing before this line, inside the %q opened on line %d: separate its items with \",\"",
				string(o.ch), o.line)
		}
	case li.key != "" && (strings.Contains(li.rest, ": ") || strings.HasSuffix(li.rest, ":")):
		return fmt.Sprintf("the value of %q contains \": \", which YAML reads as another key: put the value in quotes, e.g. %s: %s",
			li.key, li.key, strconv.Quote(li.rest))
	case li.key != "" && li.rest != "" && (li.rest[0] == '"' || li.rest[0] == '\'') && textAfterQuote(li.rest):
		return fmt.Sprintf("there is text after the closing quote of the value of %q: put all of the value inside the quotes", li.key)
	}
	return t.indentation(k)
}

// indentation explains an indentation error at line k from the lines
// above it.
func (t *text) indentation(k int) string {
	cur := parseLine(t.lines[k-1][:t.comment[k-1]])
	levels := t.levels(k)
	generic := "check the indentation of this line and of the one above it: the keys of one mapping, " +
		`and the "- " items of one list, must start in the same column`
	if len(levels) == 0 {
		return generic
	}
	c, dash := cur.col, len(cur.dashes) > 0
	subject := "this list item"
	if dash {
		c = cur.dashes[0]
	} else {
		subject = "this line"
		if cur.key != "" {
			subject = strconv.Quote(cur.key)
		}
	}
	prev := levels[0]
	if !dash && prev.key != "" && prev.value && c > prev.col {
		return fmt.Sprintf("%s is indented more than %q on line %d, but %q already has a value, so nothing can be nested under it: "+
			"indent it by %s to line up with %q", subject, prev.key, prev.line, prev.key, spaces(prev.col), prev.key)
	}
	var targets []level
	for _, l := range levels {
		if item := parseLine(t.lines[l.line-1]); !dash && l.dash && l.col == c && item.key != "" {
			return fmt.Sprintf(`%s starts in the column of the "-" on line %d, so YAML expects a new list item here: `+
				`indent it by %s to line up with %q if it belongs to that item, or start a new item with "- "`,
				subject, l.line, spaces(item.col), item.key)
		}
		if l.dash && dash || !l.dash && l.key != "" && (!dash || !l.value) {
			if l.col == c {
				return generic
			}
			targets = append(targets, l)
		}
	}
	if len(targets) == 0 {
		return generic
	}
	// The nearest first; of two as near, the deeper.
	for i := 1; i < len(targets); i++ {
		for j := i; j > 0 && nearer(targets[j], targets[j-1], c); j-- {
			targets[j], targets[j-1] = targets[j-1], targets[j]
		}
	}
	var opts []string
	for _, l := range targets[:min(2, len(targets))] {
		to := fmt.Sprintf("%q (line %d)", l.key, l.line)
		if l.dash {
			to = fmt.Sprintf(`the "-" on line %d`, l.line)
		}
		opts = append(opts, fmt.Sprintf("by %s to line up with %s", spaces(l.col), to))
	}
	what := "key"
	if dash {
		what = "list"
	}
	return fmt.Sprintf("%s is indented by %s, which lines up with no %s above it: indent it %s",
		subject, spaces(c), what, strings.Join(opts, ", or "))
}

func nearer(a, b level, c int) bool {
	da, db := abs(a.col-c), abs(b.col-c)
	return da < db || da == db && a.col > b.col
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}

// A level is a column that a line below can line up with: a key's, or a
// list's "-".
type level struct {
	col   int
	line  int
	key   string // "" for a "-" or a value
	dash  bool
	value bool // the key has a value on its line
}

// levels returns the columns line k can line up with, from the nearest
// line up: the line above's, then those of the blocks that contain it.
func (t *text) levels(k int) []level {
	limit := int(^uint(0) >> 1)
	var ls []level
	for j := k - 1; j >= 1 && limit > 0; j-- {
		l := t.lines[j-1][:t.comment[j-1]]
		if t.inside[j-1] || strings.TrimSpace(l) == "" {
			continue
		}
		li := parseLine(l)
		if li.col < limit {
			ls = append(ls, level{col: li.col, line: j, key: li.key, value: li.key == "" || li.rest != ""})
			limit = li.col
		}
		for d := len(li.dashes) - 1; d >= 0; d-- {
			if li.dashes[d] < limit {
				ls = append(ls, level{col: li.dashes[d], line: j, dash: true})
				limit = li.dashes[d]
			}
		}
	}
	return ls
}

// lineInfo is the shape of one line of block YAML.
type lineInfo struct {
	indent  int    // spaces before the first character
	dashes  []int  // columns of the "- " list indicators that start it
	col     int    // column of the content after them
	content string // the content, trimmed
	key     string // the content's key if it is "key:" or "key: value"
	rest    string // the value after the key
}

func parseLine(l string) lineInfo {
	li := lineInfo{indent: indentOf(l)}
	i := li.indent
	for i < len(l) && l[i] == '-' && (i+1 == len(l) || l[i+1] == ' ' || l[i+1] == '\t') {
		li.dashes = append(li.dashes, i)
		i++
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
	}
	li.col = i
	li.content = strings.TrimSpace(l[i:])
	if k, v, ok := strings.Cut(li.content+" ", ": "); ok && k != "" && !strings.ContainsAny(k[:1], `"'[{`) {
		li.key, li.rest = strings.TrimSpace(k), strings.TrimSpace(v)
	} else if q := li.content; q != "" && (q[0] == '"' || q[0] == '\'') {
		if end := strings.IndexByte(q[1:], q[0]); end >= 0 {
			if k, v, ok := strings.Cut(q[end+2:]+" ", ": "); ok && strings.TrimSpace(k) == "" {
				li.key, li.rest = q[1:end+1], strings.TrimSpace(v)
			}
		}
	}
	return li
}

func indentOf(l string) int {
	return len(l) - len(strings.TrimLeft(l, " "))
}

// tabIndent reports whether a tab is part of l's indentation, before or
// after the "- " that start it.
func tabIndent(l string) bool {
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\t':
			return true
		case l[i] == ' ', l[i] == '-' && (i+1 == len(l) || l[i+1] == ' ' || l[i+1] == '\t'):
		default:
			return false
		}
	}
	return false
}

// textAfterQuote reports whether something follows the closing quote of
// the quoted value v.
func textAfterQuote(v string) bool {
	q := v[0]
	for i := 1; i < len(v); i++ {
		switch {
		case q == '"' && v[i] == '\\':
			i++
		case q == '\'' && v[i] == '\'' && i+1 < len(v) && v[i+1] == '\'':
			i++
		case v[i] == q:
			return strings.TrimSpace(v[i+1:]) != ""
		}
	}
	return false
}
