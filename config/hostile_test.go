package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Hostile and odd configurations (the seeds of FuzzParse, testdata/fuzz):
// each is refused with an error at the line to edit that says what is
// wrong in the package's words, never yaml.v3's Go type names, and none
// takes long.
func TestParseHostileInput(t *testing.T) {
	const jump = act + "scopes:\n  - name: pump\n    max_token_jump: "
	const pair = "actuators:\n  - {name: a, pin: GPIO17, scope: s}\n  - {name: b, pin: GPIO27, scope: s}\n"
	laughs := base + "actuators:\n  - &a {name: pump, pin: GPIO17}\ninterlocks:\n  - &b {name: i, actuators: [*a, *a, *a, *a, *a, *a, *a, *a]}\n"
	for i, c := range "cdefghij" {
		prev := string("bcdefghi"[i])
		laughs += "  - &" + string(c) + " {name: " + string(c) + ", actuators: [" + strings.TrimSuffix(strings.Repeat("*"+prev+", ", 10), ", ") + "]}\n"
	}
	testErrCases(t, []errCase{
		{"float for a whole number", base + jump + "1.5\n",
			[]int{11}, []string{`max_token_jump in scope "pump" is "1.5", not a whole number`}},
		{"exponent for a whole number", base + jump + "1e3\n",
			[]int{11}, []string{`max_token_jump in scope "pump" is "1e3", not a whole number`}},
		{"negative whole number", base + jump + "-5\n",
			[]int{11}, []string{`is "-5", not a whole number of 0 or more`}},
		{"past 2^64", base + jump + "99999999999999999999999\n",
			[]int{11}, []string{`is "99999999999999999999999", not a whole number`}},
		{"past 2^63-1", base + jump + "9223372036854775808\n",
			[]int{11}, []string{"max_token_jump 9223372036854775808 is above 2^63-1", "leave it out"}},
		{"invalid UTF-8", base + "actuators:\n  - name: p\xffump\n    pin: GPIO17\n",
			[]int{7}, []string{"byte 0xff at column 12 is not UTF-8", "save the file as UTF-8"}},
		{"nested too deep", base + "actuators: " + strings.Repeat("[", 12000) + strings.Repeat("]", 12000) + "\n",
			[]int{6}, []string{"nested too deep", "exceeded max depth"}},
		{"alias before its anchor", base + pair + "interlocks:\n  - {name: i, actuators: [a, *y]}\n  - {name: j, actuators: [&y b, a]}\n",
			[]int{10}, []string{"refers to no anchor (&name) above it"}},
		{"wildcard in a name", base + "actuators:\n  - {name: \"a+b\", pin: GPIO17}\n",
			[]int{7}, []string{`actuator "a+b": name: use letters, digits, - and _ only (it is a topic level)`}},
		{"an actuator named reply", base + "actuators:\n  - {name: reply, pin: GPIO17}\n",
			[]int{7}, []string{`actuator "reply": name: reply is the topic level of the gateway's reply topics (<prefix>/<id>/reply/...); choose another name`}},
		{"an input named reply", base + "actuators:\n  - {name: a, pin: GPIO17}\ninputs:\n  - {name: reply, pin: GPIO5}\n",
			[]int{9}, []string{`input "reply": name: reply is the topic level`}},
	})

	// Aliases (*name) of a value that does not belong where they are:
	// the first error is at the alias; what follows from it may be
	// reported too, but in the package's words.
	aliases := []struct {
		name, in string
		line     int
		frag     string
	}{
		{"alias of an actuator in an interlock's list", base + "actuators:\n  - &a {name: a, pin: GPIO17}\n  - {name: b, pin: GPIO27}\ninterlocks:\n  - {name: i, actuators: [*a, b]}\n",
			10, `actuator #1 in interlock "i" is *a, the value anchored (&a) on line 7, a mapping where a single value belongs: write the value out here`},
		{"alias with a key that does not belong", base + "actuators:\n  - &a {name: a, pin: GPIO17}\nscopes:\n  - *a\n",
			9, `scope #1 is *a, the value anchored (&a) on line 7, a mapping with the key "pin", which does not belong here`},
		{"merge of another kind", base + "actuators:\n  - &p [x]\n  - {<<: *p, name: fan, pin: GPIO27}\n",
			7, `line 8: the merge (<<) in actuator "fan" takes the single value "x" where a mapping belongs`},
		{"a billion laughs", laughs,
			9, "is *a, the value anchored (&a) on line 7, a mapping where a single value belongs"},
	}
	for _, tt := range aliases {
		start := time.Now()
		_, err := Parse([]byte(tt.in))
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: Parse took %v", tt.name, d)
		}
		if err == nil {
			t.Errorf("%s: Parse succeeded, want an error", tt.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, fmt.Sprintf("line %d: ", tt.line)) || !strings.Contains(msg, tt.frag) {
			t.Errorf("%s: Parse error = %.400q, want it to start at line %d and contain %q", tt.name, msg, tt.line, tt.frag)
		}
		for _, bad := range []string{"!!", "unmarshal", "config.", "yaml: line"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: Parse error = %.400q, want no %q in it", tt.name, msg, bad)
			}
		}
	}
}
