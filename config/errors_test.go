package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
)

// An errCase is a broken configuration and what Parse must say about it.
type errCase struct {
	name  string
	in    string
	lines []int // the line each reported error starts with, in order; 0: no line
	frags []string
}

// base is lines 1-5; act is lines 6-8.
const act = "actuators:\n  - name: pump\n    pin: GPIO17\n"

// mqttWith returns a configuration with lines inserted after line 3, the
// mqtt broker.
func mqttWith(lines string) string {
	return "id: gw\nmqtt:\n  broker: tcp://127.0.0.1:1883\n" + lines + "store: fence.db\nboard: sim\n" + act
}

// TestParseErrorsPointAtTheCulprit feeds configurations that are valid YAML
// but not a valid configuration and checks, for each, that exactly one
// error per root cause is reported, that it starts with the line the user
// must edit (1-based, as editors show), and that it names the key, says
// what is wrong and how to fix it.
func TestParseErrorsPointAtTheCulprit(t *testing.T) {
	testErrCases(t, []errCase{
		// Duplicate keys: one error at the second occurrence, nothing else.
		{"duplicate top-level key", base + "id: other\n" + act,
			[]int{6}, []string{`key "id" is set twice`, "first on line 1", "delete one"}},
		{"duplicate key in mqtt", mqttWith("  broker: tcp://127.0.0.1:1884\n"),
			[]int{4}, []string{`key "broker" in mqtt is set twice`, "first on line 3"}},
		{"duplicate mqtt block", base + "mqtt:\n  broker: tcp://b:1\n" + act,
			[]int{6}, []string{`key "mqtt" is set twice`, "first on line 2"}},
		{"duplicate key inside an actuator", base + "actuators:\n  - name: pump\n    pin: GPIO17\n    pin: GPIO18\n",
			[]int{9}, []string{`key "pin" in actuator "pump" is set twice`, "first on line 8"}},
		{"duplicate key in the second actuator keeps the first's line",
			base + act + "  - name: fan\n    pin: GPIO18\n    boot: on\n    boot: off\n" + "  - name: pump\n    pin: GPIO22\n",
			[]int{12, 13}, []string{`key "boot" in actuator "fan" is set twice`, `line 13: actuator "pump": name is already used at line 7`}},
		{"duplicate key and an independent error", strings.Replace(base, "board: sim", "board: arduino", 1) + "id: other\n" + act,
			[]int{5, 6}, []string{`board "arduino"`, `key "id" is set twice`}},

		// Shapes: a list, a mapping or a single value where another is expected.
		{"list where mqtt's mapping is expected", "id: gw\nmqtt:\n  - broker: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{3}, []string{"mqtt must be a mapping, not a list", `remove the "- " in front of "broker"`}},
		{"actuators is a single value", base + "actuators: pump\n",
			[]int{6}, []string{`actuators must be a list, not the single value "pump"`, `"- "`}},
		{"actuators is a mapping", base + "actuators:\n  name: pump\n  pin: GPIO17\n",
			[]int{7}, []string{"actuators must be a list, not a mapping", `"- name: pump"`}},
		{"actuator is a single value", base + "actuators:\n  - pump\n  - name: fan\n    pin: GPIO18\n",
			[]int{7}, []string{`actuator #1 must be a mapping`, `"pump"`, "name:"}},
		{"mqtt is a single value", "id: gw\nmqtt: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{2}, []string{`mqtt must be a mapping, not the single value "tcp://a:1"`, "broker"}},
		{"no space after a colon", "id: gw\nmqtt:\n  broker:tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{3}, []string{"space after", `"broker: tcp://a:1"`}},
		{"the document is a list", "- id: gw\n- board: sim\n",
			[]int{1}, []string{"a list", "must be a mapping", `remove the "- "`}},
		{"the document is a single value", "greenhouse\n",
			[]int{1}, []string{`single value "greenhouse"`, "must be a mapping"}},
		{"id is a list", strings.Replace(base, "id: gw", "id: [a, b]", 1) + act,
			[]int{1}, []string{"id must be a single value, not a list", "quote"}},

		// Types.
		{"active_low is not a boolean", base + act + "    active_low: yes-please\n",
			[]int{9}, []string{`active_low in actuator "pump" is "yes-please"`, "true or false"}},
		{"http is a bare port", base + "http: 8080\n" + act,
			[]int{6}, []string{`http "8080"`, "host:port"}},
		{"check errors carry the key's line", strings.Replace(base, "board: sim", "board: arduino", 1) + act,
			[]int{5}, []string{`board "arduino" is unknown`}},

		// Unknown keys, with a suggestion when one is close.
		{"misspelt actuators", base + "acuators:\n  - name: pump\n    pin: GPIO17\n",
			[]int{6}, []string{`unknown key "acuators"`, `did you mean "actuators"?`}},
		{"dash instead of underscore", base + act + "    active-low: true\n",
			[]int{9}, []string{`unknown key "active-low" in actuator "pump"`, `did you mean "active_low"?`}},
		{"dash in mqtt key", mqttWith("  topic-prefix: x\n"),
			[]int{4}, []string{`unknown key "topic-prefix" in mqtt`, `did you mean "topic_prefix"?`}},
		{"misspelt required actuator key", base + "actuators:\n  - nmae: pump\n    pin: GPIO17\n",
			[]int{7}, []string{`unknown key "nmae"`, `did you mean "name"?`}},
		{"unknown key without a close one", base + "colour: red\n" + act,
			[]int{6}, []string{`unknown key "colour"`, "remove it, or use one of id, mqtt, store,"}},
		{"two unknown keys are two errors", base + "colour: red\n" + act + "    invert: true\n",
			[]int{6, 10}, []string{`unknown key "colour"`, `unknown key "invert"`}},

		// Nothing there.
		{"empty file", "", []int{0}, []string{"empty"}},
		{"only comments", "# gateway\n# to do\n", []int{0}, []string{"empty"}},
		{"only a document marker", "---\n", []int{0}, []string{"empty"}},
	})
}

// TestParseSyntaxErrorsPointAtTheCulprit does the same for YAML syntax
// errors, for which yaml.v3 often names the line before the culprit, or
// none.
func TestParseSyntaxErrorsPointAtTheCulprit(t *testing.T) {
	testErrCases(t, []errCase{
		// Indentation.
		{"mqtt key indented one space too far", mqttWith("   topic_prefix: x\n"),
			[]int{4}, []string{`"topic_prefix" is indented more than "broker" on line 3`, "already has a value", "indent it by 2 spaces"}},
		{"mqtt key indented one space too little", mqttWith(" topic_prefix: x\n"),
			[]int{4}, []string{`"topic_prefix" is indented by 1 space`, `by 2 spaces to line up with "broker" (line 3)`, `by 0 spaces to line up with "mqtt" (line 2)`}},
		{"mqtt keys in different columns", "id: gw\nmqtt:\n    broker: tcp://a:1\n  topic_prefix: y\nstore: s\nboard: sim\n" + act,
			[]int{4}, []string{`"topic_prefix" is indented by 2 spaces`, `by 4 spaces to line up with "broker" (line 3)`}},
		{"top-level key indented under a key with a value", "id: gw\nmqtt:\n  broker: tcp://a:1\nstore: fence.db\n  board: sim\n" + act,
			[]int{5}, []string{`"board" is indented more than "store" on line 4`, "indent it by 0 spaces"}},
		{"actuator item indented one space too far", base + act + "   - name: fan\n    pin: GPIO18\n",
			[]int{9}, []string{"indented by 3 spaces", `by 2 spaces to line up with the "-" on line 7`}},
		{"culprit far below the start of its list (yaml.v3 names line 6)",
			base + "actuators:\n" + strings.Repeat("  - {name: a, pin: GPIO17}\n", 300) + "   - name: fan\n",
			[]int{307}, []string{"indented by 3 spaces", `by 2 spaces to line up with the "-" on line 306`}},
		{"actuator item indented one space too little", base + act + " - name: fan\n   pin: GPIO18\n",
			[]int{9}, []string{"indented by 1 space", `by 2 spaces to line up with the "-" on line 7`}},
		{"actuator key indented too little", base + "actuators:\n  - name: pump\n   pin: GPIO17\n",
			[]int{8}, []string{`"pin" is indented by 3 spaces`, `by 4 spaces to line up with "name" (line 7)`}},
		{"actuator key at the column of the dash", base + "actuators:\n  - name: pump\n  pin: GPIO17\n",
			[]int{8}, []string{`"pin" starts in the column of the "-" on line 7`, `indent it by 4 spaces to line up with "name"`, `"- "`}},
		{"key at the column of the dash of a longer item", base + act + "  boot: on\n",
			[]int{9}, []string{`"boot" starts in the column of the "-" on line 7`, `indent it by 4 spaces to line up with "name"`}},
		{"list item lined up with a key that has a value", base + "actuators:\n  - name: pump\n    pin: GPIO17\n    - name: fan\n",
			[]int{9}, []string{`by 2 spaces to line up with the "-" on line 7`}},
		{"tab for indentation", "id: gw\nmqtt:\n\tbroker: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{3}, []string{"tab", "use spaces"}},
		{"tab inside an actuator", base + "actuators:\n  - name: pump\n\tpin: GPIO17\n",
			[]int{8}, []string{"tab", "use spaces"}},
		{"tab after a dash", base + "actuators:\n  -\tname: pump\n    pin: GPIO17\n",
			[]int{7}, []string{"tab", "use spaces"}},

		// Punctuation.
		{"unclosed [", base + "actuators: [{name: pump, pin: GPIO17}\nhttp: x\n",
			[]int{6}, []string{`"[" opened here is never closed`, `add "]"`}},
		{"unclosed {", "id: gw\nmqtt: {broker: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{2}, []string{`"{" opened here is never closed`, `add "}"`}},
		{"unclosed double quote", "id: \"gw\nmqtt:\n  broker: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{1}, []string{`the " opened here is never closed`}},
		{"unclosed single quote", "id: gw\nmqtt:\n  broker: 'tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{3}, []string{`the ' opened here is never closed`}},
		{"missing comma between flow items", base + "actuators: [\n  {name: pump, pin: GPIO17}\n  {name: fan, pin: GPIO18}\n]\n",
			[]int{8}, []string{`","`, "line 6"}},
		{"missing colon", "id: gw\nmqtt\n  broker: tcp://a:1\nstore: s\nboard: sim\n" + act,
			[]int{2}, []string{`"mqtt" has no ":"`, "mqtt:"}},
		{"colon and space inside a value", base + "actuators:\n  - name: pump: big\n    pin: GPIO17\n",
			[]int{7}, []string{`value of "name" contains ": "`, "quotes"}},
		{"character that cannot start a value", strings.Replace(base, "id: gw", "id: @gw", 1) + act,
			[]int{1}, []string{`"@"`, `id: "@gw"`}},
		{"text after the closing quote", strings.Replace(base, "id: gw", `id: "gw"x`, 1) + act,
			[]int{1}, []string{"after the closing quote", `"id"`}},
	})
}

func testErrCases(t *testing.T, tests []errCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse = %+v, nil; want an error\ninput:\n%s", c, tt.in)
			}
			msg := err.Error()
			got := strings.Split(msg, "\n")
			if len(got) != len(tt.lines) {
				t.Errorf("Parse error has %d lines, want %d:\n%s", len(got), len(tt.lines), msg)
			}
			for i, e := range got {
				if i >= len(tt.lines) {
					break
				}
				want := fmt.Sprintf("line %d: ", tt.lines[i])
				if tt.lines[i] == 0 {
					if strings.HasPrefix(e, "line ") {
						t.Errorf("error %d = %q, want no line", i, e)
					}
				} else if !strings.HasPrefix(e, want) {
					t.Errorf("error %d = %q, want it to start with %q", i, e, want)
				}
			}
			for _, f := range tt.frags {
				if !strings.Contains(msg, f) {
					t.Errorf("Parse error = %q, want it to contain %q", msg, f)
				}
			}
			// No cascade: every required key is present in these inputs.
			for _, bad := range []string{"is required", "at least one", "config.", "!!", "unmarshal", "yaml: line"} {
				if strings.Contains(msg, bad) {
					t.Errorf("Parse error = %q, want no %q in it", msg, bad)
				}
			}
		})
	}
}

// TestParseKeepsActuatorLines checks that a broken actuator does not shift
// the lines reported for the ones after it.
func TestParseKeepsActuatorLines(t *testing.T) {
	in := base + "actuators:\n  - pump\n  - name: fan\n    pin: GPIO17\n  - name: fan\n    pin: GPIO18\n"
	_, err := Parse([]byte(in))
	if err == nil {
		t.Fatal("Parse = nil error, want one")
	}
	for _, want := range []string{"line 7: actuator #1 must be a mapping", `line 10: actuator "fan": name is already used at line 8`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error = %q, want it to contain %q", err, want)
		}
	}
}

func TestSuggestKey(t *testing.T) {
	known := []string{"name", "pin", "active_low", "boot", "scope"}
	tests := []struct{ in, want string }{
		{"active-low", "active_low"},
		{"Active_Low", "active_low"},
		{"activelow", "active_low"},
		{"nmae", "name"},
		{"pins", "pin"},
		{"scop", "scope"},
		{"colour", ""},
		{"x", ""},
		{"invert", ""},
	}
	for _, tt := range tests {
		if got := suggestKey(tt.in, known); got != tt.want {
			t.Errorf("suggestKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

var lineNumber = regexp.MustCompile(`^line (\d+): .`)

// FuzzParse checks that no input panics, that Parse returns a
// configuration or an error, and that every error names a line of the
// input (or none) in the package's words, not yaml.v3's Go type names.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		validYAML, base + act, base + "id: other\n" + act, mqttWith(" topic_prefix: x\n"),
		base + "actuators: [{name: pump, pin: GPIO17}\n", "id: \"gw\n", "- a\n- b\n", "a: &x [1]\nb: *x\n",
		base + act + "  - pump\n", base + "actuators:\n  - name: pump\n\tpin: GPIO17\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Parse([]byte(in))
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse(%q) = %v, %v; want a configuration or an error", in, c, err)
		}
		if err == nil {
			checkAccepted(t, in, c)
			return
		}
		if err.Error() == "" || !utf8.ValidString(err.Error()) {
			t.Fatalf("Parse(%q) error = %q, want a non-empty explanation in UTF-8", in, err)
		}
		n := strings.Count(lineBreaks.Replace(in), "\n") + 1
		for _, e := range strings.Split(err.Error(), "\n") {
			if m := lineNumber.FindStringSubmatch(e); m != nil {
				if l, _ := strconv.Atoi(m[1]); l < 1 || l > n {
					t.Errorf("Parse(%q) error %q: line %d is not in the input's %d lines", in, e, l, n)
				}
			}
			for _, leak := range []string{"config.", "!!"} {
				if strings.Contains(e, leak) && !strings.Contains(in, leak) {
					t.Errorf("Parse(%q) error %q: want no %q in it", in, e, leak)
				}
			}
		}
	})
}

// checkAccepted checks what Parse accepted: names that are topic levels,
// tokens within 2^63-1, and a configuration that Marshal writes and Parse
// reads back to the same document.
func checkAccepted(t *testing.T, in string, c *Config) {
	t.Helper()
	if !nameRE.MatchString(c.ID) || strings.ContainsAny(c.MQTT.TopicPrefix, "+#") {
		t.Fatalf("Parse(%q) accepted id %q, topic prefix %q", in, c.ID, c.MQTT.TopicPrefix)
	}
	for _, a := range c.Actuators {
		if !nameRE.MatchString(a.Name) || !nameRE.MatchString(a.Scope) {
			t.Fatalf("Parse(%q) accepted actuator %q in scope %q", in, a.Name, a.Scope)
		}
	}
	for _, s := range c.Scopes {
		if s.MaxTokenJump > fence.MaxToken {
			t.Fatalf("Parse(%q) accepted max_token_jump %d, above 2^63-1", in, s.MaxTokenJump)
		}
	}
	out, err := c.Marshal("")
	if err != nil {
		t.Fatalf("Parse(%q) accepted a configuration Marshal refuses: %v", in, err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse(%q) accepted it, but not its Marshal output %q: %v", in, out, err)
	}
	if again, _ := back.Marshal(""); string(again) != string(out) {
		t.Fatalf("Parse(%q): Marshal, Parse, Marshal = %q, want %q", in, again, out)
	}
}
