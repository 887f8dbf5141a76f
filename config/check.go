package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/wire"
)

func (c *Config) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	switch {
	case c.ID == "":
		bad("id is required (the gateway's name in topics, e.g. greenhouse-1)")
	case !nameRE.MatchString(c.ID):
		bad("id %q: use letters, digits, - and _ only", c.ID)
	}
	if c.MQTT.Broker == "" {
		bad("mqtt.broker is required (e.g. tcp://127.0.0.1:1883)")
	} else if u, err := mqttsec.BrokerURL(c.MQTT.Broker); err != nil {
		bad("mqtt.broker %q: %v", redacted(c.MQTT.Broker), err)
	} else {
		c.MQTT.Broker = u // with the scheme's port if it named none
	}
	errs = append(errs, c.checkSecurity()...)
	if c.MQTT.TopicPrefix == "" {
		c.MQTT.TopicPrefix = wire.DefaultPrefix
	} else if !topicPrefix(c.MQTT.TopicPrefix) {
		bad("mqtt.topic_prefix %q: no wildcards (+ #), no leading, trailing or double /, no control characters", c.MQTT.TopicPrefix)
	}
	if ha := c.HomeAssistant; ha != nil && ha.DiscoveryPrefix != "" && !topicPrefix(ha.DiscoveryPrefix) {
		bad("home_assistant.discovery_prefix %q: no wildcards (+ #), no leading, trailing or double /, no control characters (Home Assistant's default is homeassistant)", ha.DiscoveryPrefix)
	}
	if c.Store == "" {
		bad("store is required (the fence store's file, e.g. /var/lib/fencegate/fence.db)")
	}
	switch {
	case pinmap.Known(c.Board):
	case c.Board == "":
		bad("board is required (sim, or raspberry-pi to detect the model)")
	default:
		bad("board %q is unknown (want %s)", c.Board, strings.Join(pinmap.Boards(), ", "))
	}
	if c.HTTP != nil && *c.HTTP != "" {
		_, port, err := net.SplitHostPort(*c.HTTP)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil {
			bad("http %q: want host:port, e.g. 127.0.0.1:8080, or \"\" to disable", *c.HTTP)
		}
	}
	if len(c.Actuators) == 0 {
		bad("actuators: at least one is required")
	}
	errs = append(errs, c.checkModbus()...)
	names := nameSet{}
	pins := map[string]string{}
	for i := range c.Actuators {
		a := &c.Actuators[i]
		where := itemWhere("actuator", i, a.line, a.Name)
		if msg := names.check(a.Name, a.line, "name is required", true); msg != "" {
			bad("%s: %s", where, msg)
		}
		given, g, err := c.resolveOutput(a)
		if err != nil {
			bad("%s: %v", where, strings.TrimPrefix(err.Error(), "pinmap: "))
		} else if other, dup := pins[g]; dup {
			bad("%s: %s is %s, already used by %q", where, given, pinmap.Describe(g), other)
		} else {
			pins[g] = a.Name
			a.output = g
			if a.Pin != "" {
				a.Pin = g
			}
		}
		if err := a.setpointKind(); err != nil {
			errs = append(errs, c.specProblem("actuator", i, a.line, a.Name, err))
		} else if boot, err := actuator.ParseBoot(a.Boot); err != nil {
			errs = append(errs, c.specProblem("actuator", i, a.line, a.Name, err))
		} else {
			a.Boot = string(boot)
			if err := actuator.CheckKind(a.spec()); err != nil {
				errs = append(errs, c.specProblem("actuator", i, a.line, a.Name, err))
			}
		}
		if a.Scope != "" && !nameRE.MatchString(a.Scope) {
			bad("%s: scope %q: use letters, digits, - and _ only", where, a.Scope)
		} else {
			a.Scope = a.scope()
		}
	}
	var locks []fence.Interlock // the interlocks checked so far, together
	for i, g := range c.Locks() {
		if g.Name != "" && !nameRE.MatchString(g.Name) {
			bad("%s: name: use letters, digits, - and _ only", itemWhere("interlock", i, c.Interlocks[i].line, g.Name))
			continue
		}
		if err := actuator.CheckInterlocks(c.Specs(), append(locks, g)); err != nil {
			errs = append(errs, c.specProblem("interlock", i, c.Interlocks[i].line, g.Name, err))
			continue
		}
		locks = append(locks, g)
	}
	errs = append(errs, c.checkInputs()...)
	errs = append(errs, c.checkScopes()...)
	errs = append(errs, c.checkSigning()...)
	return errors.Join(errs...)
}

// specProblem is what a check of package actuator found wrong with the
// i-th item of kind (actuator, interlock, scope) at line: said at the
// line of the key at fault, if the configuration has it. An error about
// another item (the interlock a scope's safe state conflicts with) names
// that item.
func (c *Config) specProblem(kind string, i, line int, name string, err error) error {
	var se *actuator.SpecError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %v", itemWhere(kind, i, line, name), err)
	}
	if k, n := se.Item(); n != "" && (k != kind || n != name) {
		return fmt.Errorf("%s: %s %s: %s", itemWhere(kind, i, line, name), k, n, se.Msg)
	}
	if l := c.lines[fmt.Sprintf("%ss[%d].%s", kind, i, se.Field)]; se.Field != "" && l > 0 {
		line = l
	}
	return fmt.Errorf("%s: %s", itemWhere(kind, i, line, name), se.Msg)
}

// itemWhere says where the i-th item of the list of kinds is: at its line
// and name, or, without a line, by its index.
func itemWhere(kind string, i, line int, name string) string {
	if line > 0 {
		return fmt.Sprintf("line %d: %s %q", line, kind, name)
	}
	return fmt.Sprintf("%ss[%d]", kind, i)
}

// nameSet holds the names of a list's items, with the line of each.
type nameSet map[string]int

// check checks the name of an item at line: given (else missing), a
// name, one that no topic of the gateway's has at its level if the name
// is a topic level (topic), and not taken by an earlier item. It returns
// what is wrong, or "" after adding the name.
func (n nameSet) check(name string, line int, missing string, topic bool) string {
	hint := ""
	if topic {
		hint = " (it is a topic level)"
	}
	switch {
	case name == "":
		return missing
	case !nameRE.MatchString(name):
		return "name: use letters, digits, - and _ only" + hint
	case topic && name == wire.ReplyLevel:
		return "name: " + name + " is the topic level of the gateway's reply topics (<prefix>/<id>/" + name + "/...); choose another name"
	case n[name] > 0:
		return fmt.Sprintf("name is already used at line %d", n[name])
	}
	n[name] = max(line, 1)
	return ""
}

// topicPrefix reports whether p may begin MQTT topic names: no wildcards,
// no leading, trailing or double /.
// topicPrefix reports whether p can begin the topics the gateway
// publishes on (see wire.CheckPrefix).
func topicPrefix(p string) bool { return wire.CheckPrefix(p) == nil }

// checkInputs checks the inputs, and the rules that name them: an
// actuator's requires and a scope's trip.
func (c *Config) checkInputs() []error {
	var errs []error
	lines := map[string]string{} // canonical line → what uses it
	for _, a := range c.Actuators {
		if a.output != "" {
			lines[a.output] = fmt.Sprintf("actuator %q", a.Name)
		}
	}
	actuators := map[string]bool{}
	for _, a := range c.Actuators {
		actuators[a.Name] = true
	}
	names := nameSet{}
	for i := range c.Inputs {
		in := &c.Inputs[i]
		where := itemWhere("input", i, in.line, in.Name)
		if msg := names.check(in.Name, in.line, "name is required", true); msg != "" {
			errs = append(errs, fmt.Errorf("%s: %s", where, msg))
		} else if actuators[in.Name] {
			errs = append(errs, fmt.Errorf("%s: an actuator has this name; an input needs a name of its own", where))
		}
		given, g, err := resolveLine(in.Pin, in.Chip, in.Line)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s", where, strings.TrimPrefix(err.Error(), "pinmap: ")))
		case lines[g] != "":
			errs = append(errs, fmt.Errorf("%s: %s is %s, already used by %s (a line is an input or an output)", where, given, pinmap.Describe(g), lines[g]))
		default:
			lines[g] = fmt.Sprintf("input %q", in.Name)
			in.output = g
			if in.Pin != "" {
				in.Pin = g
			}
		}
		switch in.Pull {
		case "", "none", "up", "down":
		default:
			errs = append(errs, fmt.Errorf("%s: pull %q: want none (the default), up or down", where, in.Pull))
		}
		switch in.Edge {
		case "", "both", "rising", "falling":
		default:
			errs = append(errs, fmt.Errorf("%s: edge %q: want both (the default), rising or falling", where, in.Edge))
		}
		if in.Debounce < 0 || in.Debounce > time.Second {
			errs = append(errs, fmt.Errorf("%s: debounce %v: want 0 to 1s", where, in.Debounce))
		}
	}
	level := func(where, key string, l *Level) {
		switch {
		case l == nil:
		case l.Input == "":
			errs = append(errs, fmt.Errorf("%s: %s: name the input (input: NAME)", where, key))
		case names[l.Input] == 0:
			errs = append(errs, fmt.Errorf("%s: %s: no input %q (inputs: %s)", where, key, l.Input, strings.Join(sortedKeys(names), ", ")))
		case l.Level != "high" && l.Level != "low":
			errs = append(errs, fmt.Errorf("%s: %s: level %q: want high or low", where, key, l.Level))
		}
	}
	for i, a := range c.Actuators {
		level(itemWhere("actuator", i, a.line, a.Name), "requires", a.Requires)
	}
	edges := map[string]string{}
	for _, in := range c.Inputs {
		edges[in.Name] = in.Edge
	}
	for i, s := range c.Scopes {
		where := itemWhere("scope", i, s.line, s.Name)
		level(where, "trip", s.Trip)
		if t := s.Trip; t != nil && names[t.Input] > 0 {
			// The board reports only the input's edges: the trip level
			// must be one it reports.
			if e := edges[t.Input]; (e == "falling" && t.Level == "high") || (e == "rising" && t.Level == "low") {
				errs = append(errs, fmt.Errorf("%s: trip: input %s reports only %s edges, so it never reports reaching %s: give it edge: both (or %s)",
					where, t.Input, e, t.Level, map[string]string{"high": "rising", "low": "falling"}[t.Level]))
			}
		}
	}
	return errs
}

func (c *Config) checkScopes() []error {
	var errs []error
	used := map[string]bool{}
	for _, a := range c.Actuators {
		used[a.Scope] = true
	}
	seen := map[string]int{}
	for i, s := range c.Scopes {
		where := itemWhere("scope", i, s.line, s.Name)
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is required (an actuator's scope, or its name if it sets none)", where))
		case seen[s.Name] > 0:
			errs = append(errs, fmt.Errorf("%s: already configured at line %d; put its settings in one entry", where, seen[s.Name]))
		case !used[s.Name]:
			errs = append(errs, fmt.Errorf("%s: no actuator is in this scope (scopes in use: %s); check the spelling", where, strings.Join(sortedKeys(used), ", ")))
		case s.MaxTokenJump > fence.MaxToken:
			errs = append(errs, fmt.Errorf("%s: max_token_jump %d is above 2^63-1, the largest token, so it limits nothing: leave it out for no limit", where, s.MaxTokenJump))
		case s.Safe != nil && s.Safe.State != "" && s.Safe.State != "on" && s.Safe.State != "off":
			errs = append(errs, fmt.Errorf("%s: safe.state %q: want off (the default) or on", where, s.Safe.State))
		default:
			seen[s.Name] = max(s.line, 1)
			if s.Safe != nil {
				if err := actuator.CheckSafe(s.Name, s.Safe.rule(), c.Specs(), c.Locks(), s.Trip != nil); err != nil {
					errs = append(errs, c.specProblem("scope", i, s.line, s.Name, err))
				}
			}
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// redacted is the broker URL s with any password in it replaced.
func redacted(s string) string { return mqttsec.Redacted(s) }
