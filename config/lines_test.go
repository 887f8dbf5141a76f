package config

import (
	"strconv"
	"strings"
	"testing"
)

// TestErrorLines: an error about one key of an item names the line of
// that key's value, where a person editing the file must go; one about
// the item as a whole (a missing key) names the item's line. Each
// document marks the line the error must name with "# <-".
func TestErrorLines(t *testing.T) {
	const head = base // lines 1-5
	const pump = "  - name: pump\n    pin: GPIO17\n"
	tests := []struct {
		name, yaml, frag string
	}{
		{"pin", head + "actuators:\n  - name: pump\n    pin: GPIO99 # <-\n",
			`actuator "pump": pin "GPIO99"`},
		{"chip line", head + "actuators:\n  - name: pump\n    chip: mcp23017\n    line: \"a b\" # <-\n",
			"no spaces or colons"},
		{"pin used twice", head + "actuators:\n" + pump + "  - name: valve\n    pin: PIN11 # <-\n",
			`already used by "pump"`},
		{"name used twice", head + "actuators:\n  - pin: GPIO17\n    name: pump\n  - pin: GPIO18\n    name: pump # <-\n",
			"name is already used at line 8"},
		{"name not a name", head + "actuators:\n  - pin: GPIO17\n    name: \"p ump\" # <-\n",
			"name: use letters"},
		{"scope", head + "actuators:\n  - name: pump\n    pin: GPIO17\n    scope: \"a+b\" # <-\n",
			`scope "a+b"`},
		{"kind on the line below its key", head + "actuators:\n  - name: pump\n    pin: GPIO17\n    kind:\n      toggle # <-\n",
			`kind "toggle"`},
		{"max_on on the line below its key", head + "actuators:\n  - name: pump\n    pin: GPIO17\n    kind: pulse\n    max_pulse: 1s\n    max_on:\n      1m # <-\n",
			"max_on: a pulse output"},
		{"requires input", head + "inputs:\n  - {name: door, pin: GPIO5}\nactuators:\n  - name: pump\n    pin: GPIO17\n    requires:\n      level: high\n      input: dor # <-\n",
			`requires: no input "dor"`},
		{"require_signature", head + "actuators:\n  - name: pump\n    pin: GPIO17\n    require_signature: true # <-\n",
			"require_signature is true but no controllers"},
		{"modbus coil", head + "modbus:\n  - {name: relays, url: \"tcp://10.0.0.7:502\"}\nactuators:\n  - name: fan\n    modbus:\n      bus: relays\n      unit: 1\n      coil: 70000 # <-\n",
			"modbus: coil 70000"},
		{"modbus bus", head + "modbus:\n  - {name: relays, url: \"tcp://10.0.0.7:502\"}\nactuators:\n  - name: fan\n    modbus:\n      unit: 1\n      coil: 0\n      bus: relay # <-\n",
			`bus "relay" is not configured`},
		{"modbus url", head + "modbus:\n  - name: relays\n    url: udp://h:502 # <-\nactuators:\n  - name: fan\n    modbus: {bus: relays, unit: 1, coil: 0}\n",
			`url "udp://h:502"`},
		{"modbus poll", head + "modbus:\n  - name: relays\n    url: tcp://h:502\n    poll: 10ms # <-\nactuators:\n  - name: fan\n    modbus: {bus: relays, unit: 1, coil: 0}\n",
			"poll 10ms"},
		{"input pull", head + "actuators:\n" + pump + "inputs:\n  - name: door\n    pin: GPIO5\n    pull: sideways # <-\n",
			`pull "sideways"`},
		{"input named as an actuator", head + "actuators:\n" + pump + "inputs:\n  - pin: GPIO5\n    name: pump # <-\n",
			"an actuator has this name"},
		{"interlock name", head + "actuators:\n" + pump + "interlocks:\n  - actuators: [pump]\n    name: \"a b\" # <-\n",
			"name: use letters"},
		{"interlock dead_time on the line below its key", head + "actuators:\n  - {name: a, pin: GPIO17, scope: s}\n  - {name: b, pin: GPIO27, scope: s}\ninterlocks:\n  - name: ab\n    actuators: [a, b]\n    dead_time:\n      1m # <-\n",
			"dead_time 1m0s"},
		{"scope safe.state", head + "actuators:\n" + pump + "scopes:\n  - name: pump\n    safe:\n      after: 30s\n      state: closed # <-\n",
			`safe.state "closed"`},
		{"scope safe", head + "actuators:\n" + pump + "scopes:\n  - name: pump\n    safe: # <-\n      state: off\n",
			"safe: give after"},
		{"scope no actuator", head + "actuators:\n" + pump + "scopes:\n  - max_token_jump: 5\n    name: fan # <-\n",
			"no actuator is in this scope"},
		{"trip level", head + "actuators:\n" + pump + "inputs:\n  - {name: door, pin: GPIO5, edge: falling}\nscopes:\n  - name: pump\n    safe: {after: 30s}\n    trip:\n      input: door\n      level: high # <-\n",
			"reports only falling edges"},
		{"controller public_key", head + "actuators:\n" + pump + "controllers:\n  - name: ctl-a\n    public_key: ed25519:AAAA # <-\n    scopes: [pump]\n",
			"public_key: not a public key"},
		{"controller scope", head + "actuators:\n" + pump + "controllers:\n  - name: ctl-a\n    public_key: \"ed25519:" + strings.Repeat("A", 43) + "=\"\n    scopes:\n      - pump\n      - pmup # <-\n",
			`scopes: no actuator is in scope "pmup"`},
		{"mqtt broker on the line below its key", "id: gw\nmqtt:\n  broker:\n    udp://h:1883 # <-\nstore: fence.db\nboard: sim\nactuators:\n" + pump,
			"mqtt.broker"},
		{"mqtt.tls.server_name on the line below its key", "id: gw\nmqtt:\n  broker: ssl://h:8883\n  tls:\n    server_name:\n      \"a b\" # <-\nstore: fence.db\nboard: sim\nactuators:\n" + pump,
			"mqtt.tls.server_name"},
		// About the item as a whole: at the item's line.
		{"missing pin", head + "actuators:\n  - name: pump # <-\n    boot: off\n",
			"pin is required"},
		{"missing name", head + "actuators:\n  - pin: GPIO17 # <-\n    boot: off\n",
			"name is required"},
		{"missing public_key", head + "actuators:\n" + pump + "controllers:\n  - name: ctl-a # <-\n    scopes: [pump]\n",
			"public_key is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := 0
			for i, l := range strings.Split(tt.yaml, "\n") {
				if strings.HasSuffix(l, "# <-") {
					want = i + 1
				}
			}
			if want == 0 {
				t.Fatal("the document marks no line")
			}
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error at line %d", want)
			}
			for _, e := range strings.Split(err.Error(), "\n") {
				if strings.Contains(e, tt.frag) {
					if !strings.HasPrefix(e, "line "+strconv.Itoa(want)+": ") {
						t.Errorf("error %q: want it at line %d", e, want)
					}
					return
				}
			}
			t.Errorf("Parse error\n%v\nlacks %q", err, tt.frag)
		})
	}
}
