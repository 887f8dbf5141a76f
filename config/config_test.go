package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

const validYAML = `id: greenhouse-1
mqtt:
  broker: tcp://127.0.0.1:1883
  topic_prefix: fencegate
store: /var/lib/fencegate/fence.db
board: sim
http: 127.0.0.1:8080
actuators:
  - name: pump
    pin: GPIO17
    active_low: false
    boot: last
    scope: pump
`

// base is a minimal valid configuration without http and actuators; tests
// append to it.
const base = `id: gw
mqtt:
  broker: tcp://127.0.0.1:1883
store: fence.db
board: sim
`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(validYAML))
	if err != nil {
		t.Fatalf("Parse(valid) error: %v", err)
	}
	if c.ID != "greenhouse-1" {
		t.Errorf("ID = %q, want %q", c.ID, "greenhouse-1")
	}
	if c.MQTT.Broker != "tcp://127.0.0.1:1883" {
		t.Errorf("MQTT.Broker = %q, want %q", c.MQTT.Broker, "tcp://127.0.0.1:1883")
	}
	if c.MQTT.TopicPrefix != "fencegate" {
		t.Errorf("MQTT.TopicPrefix = %q, want %q", c.MQTT.TopicPrefix, "fencegate")
	}
	if c.Store != "/var/lib/fencegate/fence.db" {
		t.Errorf("Store = %q, want %q", c.Store, "/var/lib/fencegate/fence.db")
	}
	if c.Board != BoardSim {
		t.Errorf("Board = %q, want %q", c.Board, BoardSim)
	}
	if got := c.HTTPAddr(); got != "127.0.0.1:8080" {
		t.Errorf("HTTPAddr() = %q, want %q", got, "127.0.0.1:8080")
	}
	want := []Actuator{{Name: "pump", Pin: "GPIO17", Boot: "last", Scope: "pump", output: "GPIO17"}}
	if !reflect.DeepEqual(c.Actuators, want) {
		t.Errorf("Actuators = %+v, want %+v", c.Actuators, want)
	}
}

func TestParseDefaults(t *testing.T) {
	in := base + `actuators:
  - name: pump
    pin: BCM17
  - name: valve
    pin: PIN13
    active_low: true
    boot: off
  - name: fan
    pin: pin12
    boot: on
    scope: climate
  - name: heater
    pin: gpio22
    scope: climate
`
	c, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	if c.MQTT.TopicPrefix != "fencegate" {
		t.Errorf("MQTT.TopicPrefix = %q, want %q", c.MQTT.TopicPrefix, "fencegate")
	}
	if c.Store != "fence.db" {
		t.Errorf("Parse left Store = %q, want %q (relative paths are resolved by Load)", c.Store, "fence.db")
	}
	want := []Actuator{
		{Name: "pump", Pin: "GPIO17", Boot: "last", Scope: "pump", output: "GPIO17"},
		{Name: "valve", Pin: "GPIO27", ActiveLow: true, Boot: "off", Scope: "valve", output: "GPIO27"},
		{Name: "fan", Pin: "GPIO18", Boot: "on", Scope: "climate", output: "GPIO18"},
		{Name: "heater", Pin: "GPIO22", Boot: "last", Scope: "climate", output: "GPIO22"},
	}
	if !reflect.DeepEqual(c.Actuators, want) {
		t.Errorf("Actuators = %+v, want %+v", c.Actuators, want)
	}
}

func TestParsePinForms(t *testing.T) {
	for _, pin := range []string{"GPIO17", "BCM17", "PIN11", "gpio17", "bcm17", "pin11", "Pin11"} {
		c, err := Parse([]byte(base + "actuators:\n  - name: pump\n    pin: " + pin + "\n"))
		if err != nil {
			t.Errorf("Parse(pin %s) error: %v", pin, err)
			continue
		}
		if got := c.Actuators[0].Pin; got != "GPIO17" {
			t.Errorf("Parse(pin %s).Pin = %q, want %q", pin, got, "GPIO17")
		}
	}
}

// Inputs, an actuator's requires and a scope's trip reach the bank and
// the board.
func TestParseInputs(t *testing.T) {
	c, err := Parse([]byte(base + `actuators:
  - {name: gate, pin: GPIO5, requires: {input: door-closed, level: high}}
  - {name: heater, pin: GPIO6}
inputs:
  - {name: door-closed, pin: PIN36, pull: up, debounce: 20ms, edge: both}
  - {name: overheat, chip: mcp23017@21, line: GPB7}
scopes:
  - {name: heater, trip: {input: overheat, level: high}, safe: {state: "off"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Specs()[0].Requires; r == nil || *r != (actuator.InputLevel{Input: "door-closed", High: true}) {
		t.Errorf("gate requires %+v", r)
	}
	if got := c.Trips(); !reflect.DeepEqual(got, map[string]actuator.InputLevel{"heater": {Input: "overheat", High: true}}) {
		t.Errorf("Trips() = %+v", got)
	}
	if in := c.Inputs[0]; in.Output() != "GPIO16" || in.Pull != "up" || in.Debounce != 20*time.Millisecond {
		t.Errorf("input 0 = %+v (line %s)", in, in.Output())
	}
	if in := c.Inputs[1]; in.Output() != "mcp23017@21:GPB7" {
		t.Errorf("input 1 on %q", in.Output())
	}
}

// A scope's dead-man and an output's max_on reach the bank's options.
func TestParseSafeAndMaxOn(t *testing.T) {
	c, err := Parse([]byte(base + "actuators:\n  - {name: pump, pin: GPIO5, max_on: 10m}\n  - {name: fan, pin: GPIO6}\nscopes:\n  - {name: pump, safe: {after: 30s, on_disconnect: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Specs()[0].MaxOn; got != 10*time.Minute {
		t.Errorf("max_on %v, want 10m", got)
	}
	want := map[string]actuator.Safe{"pump": {After: 30 * time.Second, State: fence.StateOff, OnDisconnect: true}}
	if got := c.SafeRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("SafeRules() = %+v, want %+v", got, want)
	}
}

// A pulse output: kind, default width and max_pulse reach the spec.
func TestParsePulse(t *testing.T) {
	c, err := Parse([]byte(base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, pulse: 500ms, max_pulse: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Specs()[0]
	if s.Kind != actuator.KindPulse || s.Pulse != 500*time.Millisecond || s.MaxPulse != 5*time.Second {
		t.Errorf("spec %+v, want kind pulse, 500ms, max 5s", s)
	}
}

// An output on another GPIO chip: chip and line, the line by offset (a
// YAML number or string) or by name.
func TestParseChipLine(t *testing.T) {
	c, err := Parse([]byte(base + `actuators:
  - {name: pump, chip: mcp23017@20, line: 3}
  - {name: valve, chip: gpiochip2, line: "07"}
  - {name: door, chip: pcf8574, line: P4, active_low: true}
  - {name: fan, pin: PIN11}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"mcp23017@20:3", "gpiochip2:7", "pcf8574:P4", "GPIO17"} {
		if got := c.Actuators[i].Output(); got != want {
			t.Errorf("actuator %d: Output() = %q, want %q", i, got, want)
		}
		if got := c.Specs()[i].PinName; got != want {
			t.Errorf("actuator %d: Spec.PinName = %q, want %q", i, got, want)
		}
	}
}

func TestParseFlowStyle(t *testing.T) {
	// The form cmd/gateway's simulator generates.
	in := `id: sim
mqtt: {broker: "tcp://127.0.0.1:1883"}
store: "/tmp/x.db"
board: sim
http: ""
actuators:
  - {name: pump, pin: GPIO17, boot: off, scope: "pump"}
  - {name: fan, pin: GPIO22, boot: last, scope: "climate"}
`
	c, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	if len(c.Actuators) != 2 || c.Actuators[1].Scope != "climate" || c.Actuators[0].Boot != "off" {
		t.Errorf("Actuators = %+v, want pump (off) and fan (scope climate)", c.Actuators)
	}
}

func TestHTTPAddr(t *testing.T) {
	tests := []struct {
		name, http, want string
	}{
		{"absent", "", DefaultHTTP},
		{"empty disables", "http: \"\"\n", ""},
		{"null is absent", "http: ~\n", DefaultHTTP},
		{"set", "http: 0.0.0.0:9000\n", "0.0.0.0:9000"},
		{"port only", "http: \":9000\"\n", ":9000"},
		{"ipv6", "http: \"[::1]:9000\"\n", "[::1]:9000"},
		{"any port", "http: \"127.0.0.1:0\"\n", "127.0.0.1:0"},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(base + tt.http + "actuators:\n  - {name: pump, pin: GPIO17}\n"))
		if err != nil {
			t.Errorf("%s: Parse error: %v", tt.name, err)
			continue
		}
		if got := c.HTTPAddr(); got != tt.want {
			t.Errorf("%s: HTTPAddr() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if DefaultHTTP != "127.0.0.1:8080" {
		t.Errorf("DefaultHTTP = %q, want %q", DefaultHTTP, "127.0.0.1:8080")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, store, want string
	}{
		{"relative", "fence.db", filepath.Join(dir, "fence.db")},
		{"relative subdir", "data/fence.db", filepath.Join(dir, "data", "fence.db")},
		{"dot dot", "../fence.db", filepath.Join(filepath.Dir(dir), "fence.db")},
		{"absolute", "/var/lib/fencegate/fence.db", "/var/lib/fencegate/fence.db"},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, "gw"+string(rune('a'+i))+".yaml")
		in := strings.Replace(validYAML, "/var/lib/fencegate/fence.db", tt.store, 1)
		if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Errorf("%s: Load error: %v", tt.name, err)
			continue
		}
		if c.Store != tt.want {
			t.Errorf("%s: Load(%s).Store = %q, want %q", tt.name, path, c.Store, tt.want)
		}
		if c.ID != "greenhouse-1" || len(c.Actuators) != 1 {
			t.Errorf("%s: Load(%s) = %+v, want the example configuration", tt.name, path, c)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load(missing file) error = %v, want one naming the file", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(validYAML, "board: sim", "board: nope", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	if err == nil {
		t.Fatalf("Load(bad board) error = nil, want an error")
	}
	for _, frag := range []string{bad, `board "nope"`} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("Load(bad board) error = %q, want it to contain %q", err, frag)
		}
	}
}

func TestParseErrors(t *testing.T) {
	act := "actuators:\n  - name: pump\n    pin: GPIO17\n"
	tests := []struct {
		name  string
		in    string
		frags []string
	}{
		{"unknown top-level key", base + "colour: red\n" + act,
			[]string{"line 6", `unknown key "colour"`}},
		{"unknown mqtt key", "id: gw\nmqtt:\n  broker: tcp://h:1\n  qos: 2\nstore: x\nboard: sim\n" + act,
			[]string{"line 4", `unknown key "qos"`}},
		{"unknown actuator key", base + "actuators:\n  - name: pump\n    pin: GPIO17\n    invert: true\n",
			[]string{"line 9", `unknown key "invert"`}},
		{"misspelt actuator key", base + "actuators:\n  - name: pump\n    pin: GPIO17\n    activelow: true\n",
			[]string{"line 9", `"activelow"`}},
		{"duplicate yaml key", base + "id: other\n" + act,
			[]string{"line 6", `"id"`, "line 1"}},
		{"duplicate actuator yaml key", base + "actuators:\n  - name: pump\n    pin: GPIO17\n    pin: GPIO18\n",
			[]string{"line 9", `"pin"`, "line 8"}},
		{"duplicate actuator name", base + act + "  - name: pump\n    pin: GPIO18\n",
			[]string{"line 9", `"pump"`, "already used at line 7"}},
		{"duplicate pin same form", base + act + "  - name: valve\n    pin: GPIO17\n",
			[]string{"line 10", `"valve"`, "header pin 11", `"pump"`}},
		{"duplicate pin PIN11", base + act + "  - name: valve\n    pin: PIN11\n",
			[]string{`"valve"`, "PIN11", "GPIO17 (header pin 11)", `already used by "pump"`}},
		{"duplicate pin BCM17", base + act + "  - name: valve\n    pin: BCM17\n",
			[]string{`"valve"`, "BCM17", "header pin 11", `"pump"`}},
		{"duplicate pin lower case", base + "actuators:\n  - {name: pump, pin: pin11}\n  - {name: valve, pin: bcm17}\n",
			[]string{"line 8", "header pin 11", `"pump"`}},
		{"power pin", base + "actuators:\n  - {name: pump, pin: PIN1}\n",
			[]string{"line 7", `"pump"`, "PIN1", "power"}},
		{"ground pin", base + "actuators:\n  - {name: pump, pin: PIN6}\n",
			[]string{"line 7", "PIN6", "ground"}},
		{"header position 0", base + "actuators:\n  - {name: pump, pin: PIN0}\n",
			[]string{"PIN0", "1 to 40"}},
		{"header position 41", base + "actuators:\n  - {name: pump, pin: PIN41}\n",
			[]string{"PIN41", "1 to 40"}},
		{"gpio out of range", base + "actuators:\n  - {name: pump, pin: GPIO40}\n",
			[]string{"GPIO40", "not on the 40-pin header"}},
		{"gpio 28", base + "actuators:\n  - {name: pump, pin: GPIO28}\n",
			[]string{"GPIO28", "not on the 40-pin header"}},
		{"pin garbage", base + "actuators:\n  - {name: pump, pin: D4}\n",
			[]string{`"D4"`, "GPIOn"}},
		{"missing pin", base + "actuators:\n  - {name: pump}\n",
			[]string{"line 7", "pin is required", "chip: and line:"}},
		{"pulse without max_pulse", base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse}\n",
			[]string{"line 7", `actuator "door"`, "max_pulse 0s: a pulse output needs one"}},
		// A check of package actuator points at the key at fault.
		{"max_pulse too long, at its line", base + "actuators:\n  - name: door\n    pin: GPIO5\n    kind: pulse\n    max_pulse: 1h\n",
			[]string{`line 10: actuator "door": max_pulse 1h0m0s: a pulse output needs one, whole milliseconds from 1ms to 10m0s`}},
		{"dead time too long, at its line", base + "actuators:\n  - {name: a, pin: GPIO5, scope: m}\n  - {name: b, pin: GPIO6, scope: m}\ninterlocks:\n  - name: m\n    actuators: [a, b]\n    dead_time: 1m\n",
			[]string{`line 12: interlock "m": dead_time 1m0s: want 0 to 10s`}},
		{"pulse longer than max_pulse", base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, pulse: 2s, max_pulse: 1s}\n",
			[]string{"line 7", "pulse 2s", "at most max_pulse (1s)"}},
		{"pulse boot on", base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, max_pulse: 1s, boot: \"on\"}\n",
			[]string{"line 7", "boot: on: a pulse output rests off"}},
		{"pulse widths on a switch", base + "actuators:\n  - {name: pump, pin: GPIO5, max_pulse: 1s}\n",
			[]string{"line 7", "pulse and max_pulse are for kind: pulse"}},
		{"unknown kind", base + "actuators:\n  - {name: pump, pin: GPIO5, kind: toggle}\n",
			[]string{"line 7", `kind "toggle": want switch, pulse or setpoint`}},
		{"pulse output in an interlock", base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, max_pulse: 1s}\n  - {name: pump, pin: GPIO6, scope: door}\ninterlocks:\n  - {name: x, actuators: [door, pump]}\n",
			[]string{"door is a pulse output"}},
		{"safe without a time", base + "actuators:\n  - {name: pump, pin: GPIO5}\nscopes:\n  - {name: pump, safe: {state: \"off\"}}\n",
			[]string{"line 9", `scope "pump"`, "safe: give after"}},
		{"safe state bad", base + "actuators:\n  - {name: pump, pin: GPIO5}\nscopes:\n  - {name: pump, safe: {after: 1s, state: closed}}\n",
			[]string{"line 9", `safe.state "closed"`}},
		{"safe on with an interlock", base + "actuators:\n  - {name: a, pin: GPIO5, scope: m}\n  - {name: b, pin: GPIO6, scope: m}\ninterlocks:\n  - {name: m, actuators: [a, b]}\nscopes:\n  - {name: m, safe: {after: 1s, state: \"on\"}}\n",
			[]string{`scope "m"`, "a scope with an interlock is safe off"}},
		{"max_on on a pulse output", base + "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, max_pulse: 1s, max_on: 1m}\n",
			[]string{"line 7", "max_on: a pulse output is on only for its pulse"}},
		{"input on an output's line", base + "actuators:\n  - {name: pump, pin: GPIO5}\ninputs:\n  - {name: door, pin: PIN29}\n",
			[]string{"line 9", `input "door"`, "pin PIN29 is GPIO5 (header pin 29), already used by actuator \"pump\""}},
		{"input named as an actuator", base + "actuators:\n  - {name: pump, pin: GPIO5}\ninputs:\n  - {name: pump, pin: GPIO6}\n",
			[]string{"line 9", "an actuator has this name"}},
		{"input pull", base + "actuators:\n  - {name: pump, pin: GPIO5}\ninputs:\n  - {name: door, pin: GPIO6, pull: sideways}\n",
			[]string{"line 9", `pull "sideways"`}},
		{"input edge", base + "actuators:\n  - {name: pump, pin: GPIO5}\ninputs:\n  - {name: door, pin: GPIO6, edge: up}\n",
			[]string{"line 9", `edge "up"`}},
		{"input debounce", base + "actuators:\n  - {name: pump, pin: GPIO5}\ninputs:\n  - {name: door, pin: GPIO6, debounce: 2s}\n",
			[]string{"line 9", "debounce 2s: want 0 to 1s"}},
		{"requires an unknown input", base + "actuators:\n  - {name: pump, pin: GPIO5, requires: {input: dor, level: high}}\ninputs:\n  - {name: door, pin: GPIO6}\n",
			[]string{"line 7", `requires: no input "dor" (inputs: door)`}},
		{"requires a bad level", base + "actuators:\n  - {name: pump, pin: GPIO5, requires: {input: door, level: closed}}\ninputs:\n  - {name: door, pin: GPIO6}\n",
			[]string{"line 7", `requires: level "closed": want high or low`}},
		{"trip of an unknown input", base + "actuators:\n  - {name: pump, pin: GPIO5}\nscopes:\n  - {name: pump, trip: {input: heat, level: high}}\n",
			[]string{"line 9", `trip: no input "heat"`}},
		{"safe on with requires", base + "actuators:\n  - {name: gate, pin: GPIO5, requires: {input: door, level: high}}\ninputs:\n  - {name: door, pin: GPIO6}\nscopes:\n  - {name: gate, safe: {after: 1s, state: \"on\"}}\n",
			[]string{`scope "gate"`, "gate requires door is high to come on, which a safe state would not check"}},
		{"boot on with requires", base + "actuators:\n  - {name: gate, pin: GPIO5, boot: \"on\", requires: {input: door, level: high}}\ninputs:\n  - {name: door, pin: GPIO6}\n",
			[]string{"line 7", "boot: on would switch it on at start without checking that door is high"}},
		{"pin and chip", base + "actuators:\n  - {name: pump, pin: GPIO17, chip: mcp23017, line: 3}\n",
			[]string{"line 7", "pin GPIO17 and chip/line both name a line"}},
		{"chip without line", base + "actuators:\n  - {name: pump, chip: mcp23017}\n",
			[]string{"line 7", `chip "mcp23017": name the line`}},
		{"line without chip", base + "actuators:\n  - {name: pump, line: 3}\n",
			[]string{"line 7", `line "3": name its chip`}},
		{"chip line in pin", base + "actuators:\n  - {name: pump, pin: \"mcp23017:3\"}\n",
			[]string{"line 7", "with chip: and line:"}},
		{"chip with a space", base + "actuators:\n  - {name: pump, chip: \"mcp 23017\", line: 3}\n",
			[]string{"line 7", "no spaces or colons"}},
		{"offset out of range", base + "actuators:\n  - {name: pump, chip: mcp23017, line: 70000}\n",
			[]string{"line 7", "0 to 65535"}},
		{"duplicate chip line", base + "actuators:\n  - {name: pump, chip: mcp23017, line: 3}\n  - {name: valve, chip: mcp23017, line: \"03\"}\n",
			[]string{"line 8", "chip mcp23017 line 03 is line 3 of GPIO chip mcp23017", `already used by "pump"`}},
		{"missing name", base + "actuators:\n  - {pin: GPIO17}\n",
			[]string{"line 7", "name is required"}},
		{"bad name", base + "actuators:\n  - {name: a/b, pin: GPIO17}\n",
			[]string{"line 7", "name"}},
		{"bad scope", base + "actuators:\n  - {name: pump, pin: GPIO17, scope: \"a+b\"}\n",
			[]string{"line 7", `scope "a+b"`}},
		{"missing broker", "id: gw\nstore: x\nboard: sim\n" + act,
			[]string{"mqtt.broker is required"}},
		{"empty broker", "id: gw\nmqtt: {broker: \"\"}\nstore: x\nboard: sim\n" + act,
			[]string{"mqtt.broker is required"}},
		{"bad broker scheme", strings.Replace(base, "tcp://", "http://", 1) + act,
			[]string{"mqtt.broker", `scheme "http"`}},
		{"broker without scheme", strings.Replace(base, "tcp://127.0.0.1:1883", "127.0.0.1:1883", 1) + act,
			[]string{"mqtt.broker", "no scheme", "tcp://127.0.0.1:1883"}},
		{"broker host:port only", strings.Replace(base, "tcp://127.0.0.1:1883", "localhost:1883", 1) + act,
			[]string{"mqtt.broker", "no scheme", "tcp://localhost:1883"}},
		{"broker user@host:port", strings.Replace(base, "tcp://127.0.0.1:1883", "gw:secret@localhost:1883", 1) + act,
			[]string{"mqtt.broker", "no scheme", "want tcp://HOST:PORT, e.g. tcp://127.0.0.1:1883"}},
		{"broker without host", strings.Replace(base, "tcp://127.0.0.1:1883", "tcp://", 1) + act,
			[]string{"mqtt.broker", "no host"}},
		{"broker port not a number", strings.Replace(base, "tcp://127.0.0.1:1883", "tcp://127.0.0.1:mqtt", 1) + act,
			[]string{"mqtt.broker", `invalid port ":mqtt"`, "want tcp://HOST:PORT"}},
		{"broker port 0", strings.Replace(base, "tcp://127.0.0.1:1883", "tcp://127.0.0.1:0", 1) + act,
			[]string{"mqtt.broker", "port 0 is not a port (1 to 65535)"}},
		{"broker port too large", strings.Replace(base, "tcp://127.0.0.1:1883", "tcp://127.0.0.1:65536", 1) + act,
			[]string{"mqtt.broker", "port 65536 is not a port (1 to 65535)"}},
		{"missing id", strings.Replace(base, "id: gw\n", "", 1) + act,
			[]string{"id is required"}},
		{"id with slash", strings.Replace(base, "id: gw", "id: green/house", 1) + act,
			[]string{`id "green/house"`}},
		{"id with plus", strings.Replace(base, "id: gw", `id: "gw+1"`, 1) + act,
			[]string{`id "gw+1"`}},
		{"id with hash", strings.Replace(base, "id: gw", `id: "gw#"`, 1) + act,
			[]string{`id "gw#"`}},
		{"id too long", strings.Replace(base, "id: gw", "id: "+strings.Repeat("g", 65), 1) + act,
			[]string{"id "}},
		{"missing store", strings.Replace(base, "store: fence.db\n", "", 1) + act,
			[]string{"store is required"}},
		{"missing board", strings.Replace(base, "board: sim\n", "", 1) + act,
			[]string{"board is required"}},
		{"unknown board", strings.Replace(base, "board: sim", "board: arduino", 1) + act,
			[]string{`board "arduino"`, "unknown"}},
		{"unknown raspberry-pi model", strings.Replace(base, "board: sim", "board: raspberry-pi-6", 1) + act,
			[]string{`board "raspberry-pi-6"`, "raspberry-pi-4b", "raspberry-pi-zero-2-w"}},
		{"bad boot", base + "actuators:\n  - {name: pump, pin: GPIO17, boot: high}\n",
			[]string{"line 7", `boot "high"`, "last, off or on"}},
		{"topic prefix plus", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: \"fence/+\"\n", 1) + act,
			[]string{"mqtt.topic_prefix", "wildcards"}},
		{"topic prefix hash", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: \"#\"\n", 1) + act,
			[]string{"mqtt.topic_prefix"}},
		{"topic prefix with a line feed", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: \"fence\\ngate\"\n", 1) + act,
			[]string{"mqtt.topic_prefix", "control characters"}},
		{"topic prefix with a non-character", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: \"fence\\uFFFEgate\"\n", 1) + act,
			[]string{"mqtt.topic_prefix", "control characters"}},
		{"discovery prefix wildcard", base + act + "home_assistant:\n  discovery_prefix: \"ha/#\"\n",
			[]string{"home_assistant.discovery_prefix \"ha/#\"", "wildcards"}},
		{"discovery prefix slash", base + act + "home_assistant:\n  discovery_prefix: /ha\n",
			[]string{"home_assistant.discovery_prefix \"/ha\"", "leading"}},
		{"home assistant unknown key", base + act + "home_assistant:\n  discovery: true\n",
			[]string{"discovery"}},
		{"topic prefix leading slash", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: /fence\n", 1) + act,
			[]string{"mqtt.topic_prefix", "leading"}},
		{"topic prefix trailing slash", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: fence/\n", 1) + act,
			[]string{"mqtt.topic_prefix"}},
		{"topic prefix double slash", strings.Replace(base, "mqtt:\n", "mqtt:\n  topic_prefix: a//b\n", 1) + act,
			[]string{"mqtt.topic_prefix"}},
		{"bad http address", base + "http: localhost\n" + act,
			[]string{`http "localhost"`, "host:port"}},
		{"http without port", base + "http: \"127.0.0.1:\"\n" + act,
			[]string{`http "127.0.0.1:"`, "host:port"}},
		{"http port not a number", base + "http: \"127.0.0.1:abc\"\n" + act,
			[]string{`http "127.0.0.1:abc"`}},
		{"http port too large", base + "http: \"127.0.0.1:99999\"\n" + act,
			[]string{`http "127.0.0.1:99999"`}},
		{"http too many colons", base + "http: \"::1:80\"\n" + act,
			[]string{`http "::1:80"`}},
		{"no actuators", base,
			[]string{"at least one"}},
		{"empty actuator list", base + "actuators: []\n",
			[]string{"at least one"}},
		{"empty file", "",
			[]string{"empty"}},
		{"whitespace file", "\n\n   \n",
			[]string{"empty"}},
		{"comment-only file", "# nothing here\n",
			[]string{"empty"}},
		{"two documents", validYAML + "---\n" + validYAML,
			[]string{"more than one YAML document"}},
		{"not a mapping", "- a\n- b\n",
			[]string{"line 1"}},
		{"wrong type", strings.Replace(base, "id: gw", "id: [a, b]", 1) + act,
			[]string{"line 1"}},
		{"bad yaml", "id: gw\n  mqtt: [\n",
			[]string{"yaml"}},
		{"actuators not a list", base + "actuators: pump\n",
			[]string{"line 6"}},
		{"several problems reported together", "mqtt: {broker: tcp://h:1}\nstore: x\nboard: pi\nactuators: []\n",
			[]string{"id is required", `board "pi"`, "at least one"}},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.in))
		if err == nil {
			t.Errorf("%s: Parse = %+v, nil, want an error containing %q", tt.name, c, tt.frags)
			continue
		}
		if c != nil {
			t.Errorf("%s: Parse = %+v with error, want nil config", tt.name, c)
		}
		for _, f := range tt.frags {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: Parse error = %q, want it to contain %q", tt.name, err, f)
			}
		}
	}
}

// TestParseErrorsAreNotYAMLInternals checks that the decoder's own wording
// (Go type names) does not leak into messages for unknown and duplicate keys.
// TestBrokerDefaultPort: a broker URL without a port takes its scheme's,
// as gateway send's --broker and the Python client do (one rule:
// mqttsec.BrokerURL).
func TestBrokerDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"tcp://127.0.0.1":      "tcp://127.0.0.1:1883",
		"mqtt://localhost":     "mqtt://localhost:1883",
		"ssl://broker.example": "ssl://broker.example:8883",
		"mqtts://[::1]":        "mqtts://[::1]:8883",
		"tcp://127.0.0.1:1884": "tcp://127.0.0.1:1884",
	} {
		c, err := Parse([]byte(strings.Replace(base, "tcp://127.0.0.1:1883", in, 1) + "actuators:\n  - {name: pump, pin: GPIO17}\n"))
		if err != nil || c.MQTT.Broker != want {
			t.Errorf("broker %s: Parse = %v; want mqtt.broker %s", in, err, want)
			continue
		}
	}
}

// TestBrokerWithoutSchemeHidesPassword: a broker URL written without its
// scheme is not parsed as one, so its user information is cut off by hand.
func TestBrokerWithoutSchemeHidesPassword(t *testing.T) {
	_, err := Parse([]byte("id: gw\nmqtt:\n  broker: gw:secret@localhost:1883\nstore: fence.db\nboard: sim\nactuators:\n  - {name: pump, pin: GPIO17}\n"))
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "no scheme") {
		t.Errorf("Parse error = %v; want it to say there is no scheme, without the password", err)
	}
}

func TestParseErrorsAreNotYAMLInternals(t *testing.T) {
	for _, in := range []string{
		base + "colour: red\nactuators: [{name: pump, pin: GPIO17}]\n",
		base + "actuators:\n  - {name: pump, pin: GPIO17, invert: true}\n",
		base + "id: again\nactuators: [{name: pump, pin: GPIO17}]\n",
	} {
		_, err := Parse([]byte(in))
		if err == nil {
			t.Errorf("Parse(%q) error = nil, want an error", in)
			continue
		}
		for _, leak := range []string{"config.Config", "config.Actuator", "not found in type", "mapping key"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("Parse(%q) error = %q, want no %q in it", in, err, leak)
			}
		}
	}
}

func TestExampleConfigParses(t *testing.T) {
	c, err := Load("../examples/gateway.yaml")
	if err != nil {
		t.Fatalf("examples/gateway.yaml: %v", err)
	}
	if c.Actuators[1].Scope != "vent" || c.Actuators[2].Scope != "vent" {
		t.Errorf("vent actuators are in scopes %q and %q, want one scope vent", c.Actuators[1].Scope, c.Actuators[2].Scope)
	}
}

func TestRaspberryPiBoards(t *testing.T) {
	for _, b := range []string{"raspberry-pi", "raspberry-pi-zero-2-w", "raspberry-pi-3b", "raspberry-pi-3b-plus", "raspberry-pi-4b", "raspberry-pi-400", "raspberry-pi-5", "raspberry-pi-cm4"} {
		doc := "id: gw\nmqtt: {broker: tcp://127.0.0.1:1883}\nstore: s.db\nboard: " + b + "\nactuators:\n  - {name: relay1, pin: PIN11, active_low: true}\n"
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("board %s: %v", b, err)
			continue
		}
		if c.Board != b || c.Actuators[0].Pin != "GPIO17" {
			t.Errorf("board %s parsed as %q with pin %q", b, c.Board, c.Actuators[0].Pin)
		}
	}
}

// TestMarshalRoundTrip: a configuration a program writes with Marshal reads
// back as the same configuration, whatever its values look like to YAML.
func TestMarshalRoundTrip(t *testing.T) {
	http := "127.0.0.1:0"
	empty := ""
	for _, c := range []*Config{
		{ID: "sim", MQTT: MQTT{Broker: "tcp://127.0.0.1:1883"}, Store: "/tmp/x y/#fence.db", Board: BoardSim, HTTP: &http,
			Actuators: []Actuator{{Name: "pump", Pin: "GPIO17", Boot: "last"}, {Name: "heater", Pin: "GPIO23", Boot: "off", Scope: "climate"},
				{Name: "on", Pin: "GPIO22", Boot: "on", Scope: "no"}, {Name: "123", Pin: "GPIO27", ActiveLow: true, Scope: "null"}}},
		{ID: "yes", MQTT: MQTT{Broker: "ssl://h:8883", TopicPrefix: "site/a", ClientID: "~", Username: "true", Password: "a: b # c"},
			Store: "s.db", Board: "raspberry-pi", HTTP: &empty, Actuators: []Actuator{{Name: "relay1", Pin: "GPIO5"}}},
	} {
		b, err := c.Marshal("generated\nby a test")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Marshal(%+v)): %v\n%s", c, err, b)
		}
		if got.ID != c.ID || got.MQTT.Password != c.MQTT.Password || got.MQTT.Username != c.MQTT.Username || got.Store != c.Store || *got.HTTP != *c.HTTP || len(got.Actuators) != len(c.Actuators) {
			t.Errorf("Parse(Marshal(c)) = %+v, want %+v\n%s", got, c, b)
		}
		for i, a := range c.Actuators {
			g := got.Actuators[i]
			if g.Name != a.Name || g.ActiveLow != a.ActiveLow || (a.Boot != "" && g.Boot != a.Boot) || (a.Scope != "" && g.Scope != a.Scope) {
				t.Errorf("actuator %d = %+v, want %+v\n%s", i, g, a, b)
			}
		}
		if !strings.HasPrefix(string(b), "# generated\n# by a test\n") {
			t.Errorf("Marshal header: %q", b)
		}
	}
}

func TestInterlocks(t *testing.T) {
	base := "id: gw\nmqtt: {broker: tcp://127.0.0.1:1883}\nstore: s.db\nboard: sim\nactuators:\n" +
		"  - {name: vent-open, pin: GPIO5, scope: vent}\n" +
		"  - {name: vent-close, pin: GPIO6, scope: vent}\n" +
		"  - {name: pump, pin: GPIO17}\n"
	good := base + "interlocks:\n  - name: vent\n    actuators: [vent-open, vent-close]\n    break_before_make: true\n    dead_time: 500ms\n"
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Locks(); len(got) != 1 || got[0].DeadTime != 500*time.Millisecond || !got[0].BreakBeforeMake || len(got[0].Members) != 2 {
		t.Errorf("Locks() = %+v", got)
	}
	tests := []struct{ yaml, want string }{
		{"interlocks:\n  - name: vent\n    actuators: [vent-open, pump]\n", `line 11: interlock "vent": vent-open is in scope "vent", pump in scope "pump"; the members of an interlock must share one scope`},
		{"interlocks:\n  - name: vent\n    actuators: [vent-open, nope]\n", `line 11: interlock "vent": no actuator "nope"`},
		{"interlocks:\n  - name: vent\n    actuators: [vent-open]\n", `line 11: interlock "vent": name at least two actuators`},
		{"interlocks:\n  - name: vent\n    actuators: [vent-open, vent-close]\n    dead_time: 1m\n", `line 12: interlock "vent": dead_time 1m0s: want 0 to 10s`},
		{"interlocks:\n  - name: a\n    actuators: [vent-open, vent-close]\n  - name: b\n    actuators: [vent-close, vent-open]\n", `line 13: interlock "b": vent-close is already in interlock a`},
		{"interlocks:\n  - name: vent\n    actuators: [vent-open, vent-close]\n    dead_time: soon\n", `line 12`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(base + tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(...%s) = %v, want an error containing %q", tt.yaml, err, tt.want)
		}
	}
	both := strings.Replace(strings.Replace(base, "scope: vent}", "scope: vent, boot: \"on\"}", 2), "", "", 1)
	if _, err := Parse([]byte(both + "interlocks:\n  - {name: vent, actuators: [vent-open, vent-close]}\n")); err == nil || !strings.Contains(err.Error(), "boot: on") {
		t.Errorf("two members with boot: on = %v, want an error", err)
	}
}

func TestScopes(t *testing.T) {
	base := `id: gw
mqtt: {broker: "tcp://127.0.0.1:1883"}
store: fence.db
board: sim
actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
`
	c, err := Parse([]byte(base + "scopes:\n  - {name: climate, max_token_jump: 100}\n  - {name: pump}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Rules(); r["climate"].MaxJump != 100 || r["pump"].MaxJump != 0 || len(r) != 2 {
		t.Errorf("Rules() = %+v", r)
	}
	for _, tt := range []struct{ scopes, want string }{
		{"scopes:\n  - {name: fan, max_token_jump: 5}\n", `line 9: scope "fan": no actuator is in this scope (scopes in use: climate, pump)`},
		{"scopes:\n  - {name: pump}\n  - {name: pump, max_token_jump: 5}\n", `line 10: scope "pump": already configured at line 9`},
		{"scopes:\n  - {max_token_jump: 5}\n", "line 9: scope \"\": name is required"},
		{"scopes:\n  - {name: pump, max_token_jump: -5}\n", "line 9"},
	} {
		_, err := Parse([]byte(base + tt.scopes))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.scopes, err, tt.want)
		}
	}
}
