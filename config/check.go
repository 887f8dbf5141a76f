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
		it := itemOf("actuators", "actuator", i, a.Name)
		if msg := names.check(a.Name, c.lines.of(it.path+".name"), "name is required", true); msg != "" {
			errs = append(errs, it.errf("%s", msg))
		}
		given, g, err := c.resolveOutput(a)
		if err != nil {
			errs = append(errs, it.errf("%s", strings.TrimPrefix(err.Error(), "pinmap: ")))
		} else if other, dup := pins[g]; dup {
			errs = append(errs, it.fieldErrf(a.outputKey(), "%s is %s, already used by %q", given, pinmap.Describe(g), other))
		} else {
			pins[g] = a.Name
			a.output = g
			if a.Pin != "" {
				a.Pin = g
			}
		}
		if err := a.setpointKind(); err != nil {
			errs = append(errs, it.specProblem(err))
		} else if boot, err := actuator.ParseBoot(a.Boot); err != nil {
			errs = append(errs, it.specProblem(err))
		} else {
			a.Boot = string(boot)
			if err := actuator.CheckKind(a.spec()); err != nil {
				errs = append(errs, it.specProblem(err))
			}
		}
		if a.Scope != "" && !nameRE.MatchString(a.Scope) {
			errs = append(errs, it.errf("scope %q: use letters, digits, - and _ only", a.Scope))
		} else {
			a.Scope = a.scope()
		}
	}
	var locks []fence.Interlock // the interlocks checked so far, together
	for i, g := range c.Locks() {
		it := itemOf("interlocks", "interlock", i, g.Name)
		if g.Name != "" && !nameRE.MatchString(g.Name) {
			errs = append(errs, it.errf("name: use letters, digits, - and _ only"))
			continue
		}
		if err := actuator.CheckInterlocks(c.Specs(), append(locks, g)); err != nil {
			errs = append(errs, it.specProblem(err))
			continue
		}
		locks = append(locks, g)
	}
	errs = append(errs, c.checkInputs()...)
	errs = append(errs, c.checkScopes()...)
	errs = append(errs, c.checkSigning()...)
	return errors.Join(errs...)
}

// A located error is check's error about the item at path item
// (actuators[0]) that subject (actuator "pump") names. Parse puts it at
// the line of field (requires.input) if given, else of the key its
// message begins with (pin "GPIO99": ...), else of the item (see
// walker.fieldPath): one rule for every item's errors.
type located struct {
	item, subject, field, msg string
}

func (e *located) Error() string { return e.subject + ": " + e.msg }

// item is the i-th item of list (actuators), of kind (actuator), named
// name: its errors are located.
type item struct {
	path, kind, name string
}

func itemOf(list, kind string, i int, name string) item {
	return item{fmt.Sprintf("%s[%d]", list, i), kind, name}
}

func (it item) subject() string { return fmt.Sprintf("%s %q", it.kind, it.name) }

// errf is an error about it, at the key its message begins with.
func (it item) errf(format string, a ...any) error {
	return &located{item: it.path, subject: it.subject(), msg: fmt.Sprintf(format, a...)}
}

// fieldErrf is an error about it's key field (a path below the item:
// requires.input, scopes[1]).
func (it item) fieldErrf(field, format string, a ...any) error {
	return &located{item: it.path, subject: it.subject(), field: field, msg: fmt.Sprintf(format, a...)}
}

// specProblem is what a check of package actuator found wrong with it:
// at the key its SpecError names. An error about another item (the
// interlock a scope's safe state conflicts with) names that item.
func (it item) specProblem(err error) error {
	var se *actuator.SpecError
	if !errors.As(err, &se) {
		return it.errf("%v", err)
	}
	if k, n := se.Item(); n != "" && (k != it.kind || n != it.name) {
		return it.errf("%s %s: %s", k, n, se.Msg)
	}
	return it.fieldErrf(se.Field, "%s", se.Msg)
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
		it := itemOf("inputs", "input", i, in.Name)
		if msg := names.check(in.Name, c.lines.of(it.path+".name"), "name is required", true); msg != "" {
			errs = append(errs, it.errf("%s", msg))
		} else if actuators[in.Name] {
			errs = append(errs, it.fieldErrf("name", "an actuator has this name; an input needs a name of its own"))
		}
		given, g, err := resolveLine(in.Pin, in.Chip, in.Line)
		switch {
		case err != nil:
			errs = append(errs, it.errf("%s", strings.TrimPrefix(err.Error(), "pinmap: ")))
		case lines[g] != "":
			errs = append(errs, it.errf("%s is %s, already used by %s (a line is an input or an output)", given, pinmap.Describe(g), lines[g]))
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
			errs = append(errs, it.errf("pull %q: want none (the default), up or down", in.Pull))
		}
		switch in.Edge {
		case "", "both", "rising", "falling":
		default:
			errs = append(errs, it.errf("edge %q: want both (the default), rising or falling", in.Edge))
		}
		if in.Debounce < 0 || in.Debounce > time.Second {
			errs = append(errs, it.errf("debounce %v: want 0 to 1s", in.Debounce))
		}
	}
	level := func(it item, key string, l *Level) {
		switch {
		case l == nil:
		case l.Input == "":
			errs = append(errs, it.fieldErrf(key+".input", "%s: name the input (input: NAME)", key))
		case names[l.Input] == 0:
			errs = append(errs, it.fieldErrf(key+".input", "%s: no input %q (inputs: %s)", key, l.Input, strings.Join(sortedKeys(names), ", ")))
		case l.Level != "high" && l.Level != "low":
			errs = append(errs, it.fieldErrf(key+".level", "%s: level %q: want high or low", key, l.Level))
		}
	}
	for i, a := range c.Actuators {
		level(itemOf("actuators", "actuator", i, a.Name), "requires", a.Requires)
	}
	edges := map[string]string{}
	for _, in := range c.Inputs {
		edges[in.Name] = in.Edge
	}
	for i, s := range c.Scopes {
		it := itemOf("scopes", "scope", i, s.Name)
		level(it, "trip", s.Trip)
		if t := s.Trip; t != nil && names[t.Input] > 0 {
			// The board reports only the input's edges: the trip level
			// must be one it reports.
			if e := edges[t.Input]; (e == "falling" && t.Level == "high") || (e == "rising" && t.Level == "low") {
				errs = append(errs, it.fieldErrf("trip.level", "trip: input %s reports only %s edges, so it never reports reaching %s: give it edge: both (or %s)",
					t.Input, e, t.Level, map[string]string{"high": "rising", "low": "falling"}[t.Level]))
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
		it := itemOf("scopes", "scope", i, s.Name)
		nameLine := max(c.lines.of(it.path+".name"), 1)
		switch {
		case s.Name == "":
			errs = append(errs, it.fieldErrf("name", "name is required (an actuator's scope, or its name if it sets none)"))
		case seen[s.Name] > 0:
			errs = append(errs, it.fieldErrf("name", "already configured at line %d; put its settings in one entry", seen[s.Name]))
		case !used[s.Name]:
			errs = append(errs, it.fieldErrf("name", "no actuator is in this scope (scopes in use: %s); check the spelling", strings.Join(sortedKeys(used), ", ")))
		case s.MaxTokenJump > fence.MaxToken:
			errs = append(errs, it.errf("max_token_jump %d is above 2^63-1, the largest token, so it limits nothing: leave it out for no limit", s.MaxTokenJump))
		case s.Safe != nil && s.Safe.State != "" && s.Safe.State != "on" && s.Safe.State != "off":
			errs = append(errs, it.errf("safe.state %q: want off (the default) or on", s.Safe.State))
		default:
			seen[s.Name] = nameLine
			if s.Safe != nil {
				if err := actuator.CheckSafe(s.Name, s.Safe.rule(), c.Specs(), c.Locks(), s.Trip != nil); err != nil {
					errs = append(errs, it.specProblem(err))
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
