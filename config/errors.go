package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A problem is one thing wrong with a configuration, at a line (0 if none
// applies).
type problem struct {
	line int
	msg  string
}

func (p problem) Error() string {
	if p.line == 0 {
		return p.msg
	}
	return fmt.Sprintf("line %d: %s", p.line, p.msg)
}

var errEmpty = errors.New("empty configuration: the file has no keys, only blank lines or comments; " +
	"it needs at least id, mqtt, store, board and actuators")

// A walker checks a parsed document against the Config type before it is
// decoded: it reports duplicate keys, unknown keys, values of the wrong
// shape or type, each at the line of its key or value, and removes them
// from the tree so that the decoder decodes everything else. Without it,
// yaml.v3 rejects a whole mapping for one duplicate key and drops a list
// item it cannot decode, and check then reports keys that are present as
// missing.
type walker struct {
	probs []problem
	// broken holds the paths (id, mqtt.broker, actuators[1].pin) that have
	// a problem reported; check's errors about them are consequences.
	broken map[string]bool
	// lines holds the line of each key and list item present, by path
	// (see lineMap).
	lines lineMap
	// fit holds what fits found for each anchored value and type.
	fit map[fitKey]string
}

func newWalker() *walker {
	return &walker{broken: map[string]bool{}, lines: lineMap{}, fit: map[fitKey]string{}}
}

func (w *walker) add(line int, format string, a ...any) {
	w.probs = append(w.probs, problem{line, fmt.Sprintf(format, a...)})
}

// err returns the problems in line order, nil if there are none.
func (w *walker) err() error {
	if len(w.probs) == 0 {
		return nil
	}
	sort.SliceStable(w.probs, func(i, j int) bool {
		a, b := w.probs[i].line, w.probs[j].line
		return a != 0 && (b == 0 || a < b)
	})
	errs := make([]error, len(w.probs))
	for i, p := range w.probs {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// document checks the document's root and walks it. It reports false if
// there is nothing to decode.
func (w *walker) document(doc *yaml.Node) bool {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		w.probs = append(w.probs, problem{msg: errEmpty.Error()})
		return false
	}
	root := doc.Content[0]
	example := `mapping of keys such as "id: greenhouse-1"`
	switch root.Kind {
	case yaml.MappingNode:
		w.mapping(root, reflect.TypeOf(Config{}), "", "")
		return true
	case yaml.SequenceNode:
		w.add(root.Line, `the configuration is a list (its lines start with "- "), but it must be a %s: remove the "- " in front of the keys`, example)
	default:
		w.add(root.Line, "the configuration is the single value %q, but it must be a %s%s", root.Value, example,
			spaceHint(root.Value, schemaOf(reflect.TypeOf(Config{})).names()))
	}
	return false
}

// mapping walks the mapping n against struct type t. path is its path
// ("" at the top), in says where it is for messages ("mqtt",
// `actuator "pump"`, "" at the top).
func (w *walker) mapping(n *yaml.Node, t reflect.Type, path, in string) {
	s := schemaOf(t)
	first := map[string]*yaml.Node{}
	var suggested []string
	keep := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			if what := w.mergeFits(v, t); what != "" {
				w.add(k.Line, "the merge (<<)%s takes %s: merge only mappings of the same keys", inSuffix(in), what)
				continue
			}
			keep = append(keep, k, v)
			continue
		}
		p := join(path, k.Value)
		if f, dup := first[k.Value]; dup {
			w.add(k.Line, "key %q%s is set twice (first on line %d): delete one of the two", k.Value, inSuffix(in), f.Line)
			w.broken[p] = true
			continue
		}
		first[k.Value] = k
		typ, known := s.field(k.Value)
		switch {
		case !known && s.open:
			keep = append(keep, k, v)
		case !known:
			if sug := suggestKey(k.Value, s.names()); sug != "" {
				w.add(k.Line, "unknown key %q%s: did you mean %q?", k.Value, inSuffix(in), sug)
				suggested = append(suggested, sug)
			} else {
				w.add(k.Line, "unknown key %q%s: remove it, or use one of %s", k.Value, inSuffix(in), strings.Join(s.names(), ", "))
			}
		default:
			w.lines[p] = valueLine(k, v)
			if w.value(v, typ, p, k.Value+inSuffix(in)) {
				keep = append(keep, k, v)
			} else {
				w.broken[p] = true
			}
		}
	}
	// A misspelt key is reported once, not again as a missing one.
	for _, sug := range suggested {
		if first[sug] == nil {
			w.broken[join(path, sug)] = true
		}
	}
	n.Content = keep
}

// value checks the value v of type t at path p; subject names it in
// messages. It reports false if v cannot be decoded.
func (w *walker) value(v *yaml.Node, t reflect.Type, p, subject string) bool {
	if v.Kind == yaml.AliasNode {
		// Its anchor is checked where it is defined, against what belongs
		// there; here only whether it fits this place too (see fits).
		if what := w.fits(v.Alias, t); what != "" {
			w.add(v.Line, "%s is *%s, the value anchored (&%s) on line %d, %s: write the value out here", subject, v.Value, v.Value, v.Alias.Line, what)
			return false
		}
		return true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(v) {
		return true
	}
	if isLeaf(t) {
		return w.leaf(v, t, subject)
	}
	switch t.Kind() {
	case reflect.Struct:
		if v.Kind != yaml.MappingNode {
			w.notMapping(v, t, subject)
			return false
		}
		w.mapping(v, t, p, subject)
	case reflect.Map:
		if v.Kind != yaml.MappingNode {
			w.notMapping(v, t, subject)
			return false
		}
		w.mapEntries(v, t.Elem(), p, subject)
	default: // slice or array
		if v.Kind != yaml.SequenceNode {
			w.notList(v, t.Elem(), subject)
			return false
		}
		w.items(v, t.Elem(), p, subject)
	}
	return true
}

// items walks a list's items. An item that cannot be decoded is replaced
// by a zero one so that the ones after it keep their index and line.
func (w *walker) items(v *yaml.Node, elem reflect.Type, p, subject string) {
	word, rest, _ := strings.Cut(subject, " ")
	single := strings.TrimSuffix(word, "s")
	if rest != "" {
		rest = " " + rest
	}
	for i, it := range v.Content {
		ip := fmt.Sprintf("%s[%d]", p, i)
		w.lines[ip] = it.Line
		label := fmt.Sprintf("%s #%d%s", single, i+1, rest)
		if name := scalarKey(it, "name"); name != "" {
			label = fmt.Sprintf("%s %q%s", single, name, rest)
		}
		if e := derefType(elem); e.Kind() == reflect.Struct && !isLeaf(e) && it.Kind == yaml.ScalarNode && !isNull(it) {
			w.add(it.Line, `%s must be a mapping, not the single value %q: give its keys, e.g. %q`,
				label, it.Value, "- "+firstKey(e)+": "+it.Value)
			w.broken[ip] = true
			v.Content[i] = zeroNode(elem, it)
			continue
		}
		if !w.value(it, elem, ip, label) {
			w.broken[ip] = true
			v.Content[i] = zeroNode(elem, it)
		}
	}
}

// mapEntries walks the values of a mapping decoded into a Go map.
func (w *walker) mapEntries(v *yaml.Node, elem reflect.Type, p, subject string) {
	first := map[string]*yaml.Node{}
	keep := v.Content[:0:0]
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if f, dup := first[k.Value]; dup {
			w.add(k.Line, "key %q in %s is set twice (first on line %d): delete one of the two", k.Value, subject, f.Line)
			w.broken[join(p, k.Value)] = true
			continue
		}
		first[k.Value] = k
		w.lines[join(p, k.Value)] = valueLine(k, val)
		if w.value(val, elem, join(p, k.Value), k.Value+" in "+subject) {
			keep = append(keep, k, val)
		} else {
			w.broken[join(p, k.Value)] = true
		}
	}
	v.Content = keep
}

// leaf checks that v decodes into the scalar type t.
func (w *walker) leaf(v *yaml.Node, t reflect.Type, subject string) bool {
	if v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode {
		what := "a list"
		if v.Kind == yaml.MappingNode {
			what = "a mapping"
		}
		w.add(v.Line, "%s must be a single value, not %s: write one value after the colon "+
			"(in quotes if it contains [ ] { } , : or #)", subject, what)
		return false
	}
	if want := leafProblem(v, t); want != "" {
		w.add(v.Line, "%s is %q, %s", subject, v.Value, want)
		return false
	}
	return true
}

// leafProblem says what is wrong with the single value v for type t: ""
// if it decodes. A whole number must be written as one: yaml.v3 would
// truncate 1.5, or take 1e3, for an integer.
func leafProblem(v *yaml.Node, t reflect.Type) string {
	if err := v.Decode(reflect.New(t).Interface()); err == nil && (!wholeNumber(t) || v.ShortTag() == "!!int") {
		return ""
	}
	want := "is of the wrong type"
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		want = "not a duration: write e.g. 500ms, 2s or 1m"
	case t == reflect.TypeOf(Percent(0)):
		want = "not a percent: write a number from 0 to 100, with at most two decimals, e.g. 42.5"
	case t.Kind() == reflect.Bool:
		want = "not a yes/no value: write true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		want = "not a whole number: write e.g. 3"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
		want = "not a whole number of 0 or more: write e.g. 3"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		want = "not a number: write e.g. 1.5"
	}
	return want
}

// wholeNumber reports whether t is an integer type decoded from a number
// (a time.Duration is decoded from text).
func wholeNumber(t reflect.Type) bool {
	if t == reflect.TypeOf(time.Duration(0)) || reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return false
	}
	return t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr
}

// fitKey is a node and the type it is checked against.
type fitKey struct {
	n *yaml.Node
	t reflect.Type
}

// fits says how the value n (an alias's anchored value) does not fit type
// t, "" if it does: its shape, its keys and its single values, all the
// way down. It reports nothing and changes nothing; each node is checked
// against each type once, so that aliases of aliases (a "billion laughs"
// document) take linear time.
func (w *walker) fits(n *yaml.Node, t reflect.Type) string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	t = derefType(t)
	k := fitKey{n, t}
	if what, done := w.fit[k]; done {
		return what
	}
	w.fit[k] = "" // a value that contains itself is yaml.v3's error, not ours
	what := w.fitsOnce(n, t)
	w.fit[k] = what
	return what
}

func (w *walker) fitsOnce(n *yaml.Node, t reflect.Type) string {
	if isNull(n) {
		return ""
	}
	if isLeaf(t) {
		if n.Kind != yaml.ScalarNode {
			return kindWord(n) + " where a single value belongs"
		}
		if leafProblem(n, t) != "" {
			return fmt.Sprintf("%q, which is not a valid value here", n.Value)
		}
		return ""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			return kindWord(n) + " where a mapping belongs"
		}
		s := schemaOf(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			ft := t
			switch {
			case key.Tag == "!!merge":
				if what := w.mergeFits(val, t); what != "" {
					return what
				}
				continue
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			default:
				var known bool
				if ft, known = s.field(key.Value); !known {
					if s.open {
						continue
					}
					return fmt.Sprintf("a mapping with the key %q, which does not belong here", key.Value)
				}
			}
			if what := w.fits(val, ft); what != "" {
				return what
			}
		}
	default: // slice or array
		if n.Kind != yaml.SequenceNode {
			return kindWord(n) + " where a list belongs"
		}
		for _, it := range n.Content {
			if what := w.fits(it, t.Elem()); what != "" {
				return what
			}
		}
	}
	return ""
}

// mergeFits says how the value of a merge key (<<) in a mapping of type t
// does not fit it: a mapping that fits t, or a list of them.
func (w *walker) mergeFits(v *yaml.Node, t reflect.Type) string {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode {
		for _, it := range v.Content {
			if what := w.fits(it, t); what != "" {
				return what
			}
		}
		return ""
	}
	return w.fits(v, t)
}

func kindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("the single value %q", n.Value)
}

// notMapping reports a list or a single value where the mapping of struct
// (or map) type t is expected.
func (w *walker) notMapping(v *yaml.Node, t reflect.Type, subject string) {
	if v.Kind == yaml.SequenceNode {
		if len(v.Content) > 0 && v.Content[0].Kind == yaml.MappingNode && len(v.Content[0].Content) > 0 {
			w.add(v.Line, `%s must be a mapping, not a list: remove the "- " in front of %q`, subject, v.Content[0].Content[0].Value)
		} else {
			w.add(v.Line, `%s must be a mapping, not a list: write its keys without "- "`, subject)
		}
		return
	}
	names := schemaOf(t).names()
	fix := `write its keys on their own lines below it, indented`
	if len(names) > 0 {
		fix = fmt.Sprintf("write its keys (%s) on their own lines below it, indented, e.g. %q",
			strings.Join(names, ", "), "  "+names[0]+": "+v.Value)
	}
	if h := spaceHint(v.Value, names); h != "" {
		fix = h[2:]
	}
	w.add(v.Line, "%s must be a mapping, not the single value %q: %s", subject, v.Value, fix)
}

// notList reports a mapping or a single value where a list of elem is
// expected.
func (w *walker) notList(v *yaml.Node, elem reflect.Type, subject string) {
	if v.Kind == yaml.MappingNode && len(v.Content) >= 2 {
		w.add(v.Line, `%s must be a list, not a mapping: put "- " in front of the first key of each item, e.g. %q`,
			subject, "- "+v.Content[0].Value+": "+v.Content[1].Value)
		return
	}
	example := "- " + v.Value
	if e := derefType(elem); e.Kind() == reflect.Struct && !isLeaf(e) {
		example = "- " + firstKey(e) + ": " + v.Value
	}
	w.add(v.Line, `%s must be a list, not the single value %q: write each item on its own line below it, starting with "- ", e.g. %q`,
		subject, v.Value, "  "+example)
}

// checked adds check's errors, less those about a path that already has a
// problem reported (they are its consequences: a key present but not
// decoded is not "required"), each at the line of what it is about (see
// lineMap.of): a located error's path, else the key its message begins
// with (mqtt.broker ...).
func (w *walker) checked(err error) {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	for _, e := range errs {
		p := problem{msg: e.Error()}
		var path string
		var loc *located
		if errors.As(e, &loc) {
			path = w.fieldPath(loc)
		} else {
			path = w.subject(p.msg)
		}
		if w.isBroken(path) {
			continue
		}
		p.line = w.lines.of(path)
		w.probs = append(w.probs, p)
	}
}

// fieldPath is the path of the key a located error is about: its field,
// or, if it names none, the keys its message begins with (pin "GPIO99":
// ..., modbus: coil 70000: ..., safe.state "x"), as deep as the document
// has them; the item itself if none.
func (w *walker) fieldPath(e *located) string {
	if e.field != "" {
		return e.item + "." + e.field
	}
	path, rest := e.item, e.msg
	for {
		key := leadingKey.FindString(rest)
		if key == "" || (w.lines[path+"."+key] == 0 && !w.broken[path+"."+key]) {
			return path
		}
		path, rest = path+"."+key, rest[len(key):]
		switch {
		case strings.HasPrefix(rest, ": "):
			rest = rest[2:]
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
		default:
			return path
		}
	}
}

var leadingKey = regexp.MustCompile(`^[a-z_]+`)

// subject returns the path a message from check is about, "" if unknown:
// the longest key path it begins with.
func (w *walker) subject(msg string) string {
	best := ""
	for k := range w.lines {
		if len(k) > len(best) && hasPathPrefix(msg, k) {
			best = k
		}
	}
	for k := range w.broken {
		if len(k) > len(best) && hasPathPrefix(msg, k) {
			best = k
		}
	}
	return best
}

func hasPathPrefix(msg, path string) bool {
	rest, ok := strings.CutPrefix(msg, path)
	return ok && (rest == "" || strings.ContainsRune(" :.[", rune(rest[0])))
}

// isBroken reports whether path or a path that contains it has a problem.
func (w *walker) isBroken(path string) bool {
	for path != "" {
		if w.broken[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return false
		}
		path = path[:i]
	}
	return false
}

// A lineMap holds the line of each key and list item of a document, by
// path (mqtt.tls.ca_file, actuators[0], actuators[0].modbus.coil,
// controllers[1].scopes[0]). It is the one place that decides which line
// an error names.
type lineMap map[string]int

// valueLine is the line of key k's value v: where v is written, if it is
// a single value; else (no value, or a mapping or list below the key) the
// key's.
func valueLine(k, v *yaml.Node) int {
	if (v.Kind == yaml.ScalarNode && !isNull(v) && v.Value != "") || v.Kind == yaml.AliasNode {
		return v.Line
	}
	return k.Line
}

// of returns the line of path, or, if the document does not have it (a
// key left out), of the nearest item or key that contains it; 0 if none.
func (m lineMap) of(path string) int {
	for path != "" {
		if l := m[path]; l > 0 {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}
