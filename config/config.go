// Package config reads and checks a gateway's YAML configuration.
//
// Loading is strict: unknown keys, duplicate keys, duplicate actuator names,
// pins used twice and missing required keys are errors that name the line
// and say what to change. Nothing is guessed.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// Board names, as package pinmap (which owns them) defines them.
const (
	BoardSim         = pinmap.Sim
	BoardRaspberryPi = pinmap.RaspberryPi
)

// DefaultHTTP is the JSON API address used when the http key is absent.
const DefaultHTTP = "127.0.0.1:8080"

// Config is a gateway's configuration.
type Config struct {
	// ID names the gateway in topics.
	ID   string `yaml:"id"`
	MQTT MQTT   `yaml:"mqtt"`
	// Store is the fence store's file. A relative path is relative to the
	// configuration file's directory.
	Store string `yaml:"store"`
	Board string `yaml:"board"`
	// HTTP is the JSON API's listen address; nil means DefaultHTTP and ""
	// disables it.
	HTTP      *string    `yaml:"http"`
	Actuators []Actuator `yaml:"actuators"`
	// Interlocks are groups of actuators of one scope of which at most one
	// may be on.
	Interlocks []Interlock `yaml:"interlocks,omitempty"`
	// Scopes set what a fence scope admits beyond its fence.
	Scopes []ScopeRules `yaml:"scopes,omitempty"`
	// Inputs are digital inputs: published, and read by the rules that
	// name them (an actuator's requires, a scope's trip).
	Inputs []Input `yaml:"inputs,omitempty"`
	// RequireSignature makes every actuator take signed commands only
	// (see signing.go).
	RequireSignature bool `yaml:"require_signature,omitempty"`
	// Controllers are the controllers whose signed commands the gateway
	// takes.
	Controllers []Controller `yaml:"controllers,omitempty"`
	// HomeAssistant, if present, announces the actuators to Home
	// Assistant through its MQTT discovery, as read-only entities.
	HomeAssistant *HomeAssistant `yaml:"home_assistant,omitempty"`

	lines map[string]int // the line of each key, by path (mqtt.tls.ca_file)
}

// HomeAssistant configures Home Assistant's MQTT discovery (package hass).
type HomeAssistant struct {
	// DiscoveryPrefix is Home Assistant's discovery prefix; "" means
	// "homeassistant", Home Assistant's default.
	DiscoveryPrefix string `yaml:"discovery_prefix,omitempty"`
}

// MQTT configures the broker connection.
type MQTT struct {
	Broker      string `yaml:"broker"`
	TopicPrefix string `yaml:"topic_prefix,omitempty"`
	ClientID    string `yaml:"client_id,omitempty"`
	Username    string `yaml:"username,omitempty"`
	// Password is the broker password inline, kept for older
	// configurations; gateway check warns about it. Use PasswordFile.
	Password string `yaml:"password,omitempty"`
	// PasswordFile names the file that holds the broker password (see
	// Security). A relative path is relative to the configuration file's
	// directory.
	PasswordFile string `yaml:"password_file,omitempty"`
	// TLS, if set, secures the connection with these files; the broker
	// URL must then be a TLS one (ssl://, mqtts://, tls://, wss://).
	TLS *TLS `yaml:"tls,omitempty"`

	sec security // what Load read
}

// Actuator configures one output.
type Actuator struct {
	Name string `yaml:"name"`
	// Pin is a line of the 40-pin header (GPIO17, BCM17, PIN11), in its
	// canonical form after Load.
	Pin string `yaml:"pin,omitempty"`
	// Chip and Line name an output on any GPIO chip the kernel exposes,
	// such as an I²C expander (instead of Pin): the chip by its label
	// (mcp23017, or mcp23017@20 for the one at address 0x20), name
	// (gpiochip2) or path, the line by its offset or name.
	Chip      string `yaml:"chip,omitempty"`
	Line      string `yaml:"line,omitempty"`
	ActiveLow bool   `yaml:"active_low,omitempty"`
	Boot      string `yaml:"boot,omitempty"`
	// Kind is switch (the default) or pulse: a pulse output rests off and
	// takes pulses of at most MaxPulse; Pulse is the width of a command
	// that says state on without pulse_ms.
	Kind     string        `yaml:"kind,omitempty"`
	Pulse    time.Duration `yaml:"pulse,omitempty"`
	MaxPulse time.Duration `yaml:"max_pulse,omitempty"`
	// MaxOn, if set, switches the output off once it has been on this
	// long (a liveness rule: the fence is untouched).
	MaxOn time.Duration `yaml:"max_on,omitempty"`
	// Requires, if set, is an input level without which a command that
	// turns the output on is refused.
	Requires *Level `yaml:"requires,omitempty"`
	Scope    string `yaml:"scope,omitempty"`
	// RequireSignature makes this actuator take signed commands only.
	RequireSignature bool `yaml:"require_signature,omitempty"`

	line   int
	output string // canonical: Pin, or the chip line
}

// Output returns the actuator's output as boards name it: its header pin
// or its chip line ("mcp23017:3", pinmap.ChipLine).
func (a *Actuator) Output() string { return a.output }

// resolveOutput returns the actuator's output as configured, for
// messages, and its canonical name: a header pin, or a chip line.
func (a *Actuator) resolveOutput() (given, canonical string, err error) {
	return resolveLine(a.Pin, a.Chip, a.Line)
}

// resolveLine resolves a line named by pin, or by chip and line.
func resolveLine(pin, chip, line string) (given, canonical string, err error) {
	switch {
	case pin != "" && (chip != "" || line != ""):
		return "", "", fmt.Errorf("pin %s and chip/line both name a line: keep pin: for a header pin, or chip: and line: for a line of another GPIO chip", pin)
	case pin != "":
		if strings.Contains(pin, ":") {
			return "", "", fmt.Errorf("pin %q: name a line of another GPIO chip with chip: and line:", pin)
		}
		g, err := pinmap.Canonical(pin)
		return "pin " + pin, g, err
	case chip != "" || line != "":
		g, err := pinmap.ChipLine(chip, line)
		return fmt.Sprintf("chip %s line %s", chip, line), g, err
	}
	return "", "", errors.New("pin is required (e.g. GPIO17, BCM17 or PIN11), or chip: and line: for a line of another GPIO chip")
}

// Interlock configures a group of actuators of one scope of which at most
// one may be on (see fence.Interlock).
type Interlock struct {
	Name      string   `yaml:"name"`
	Actuators []string `yaml:"actuators"`
	// BreakBeforeMake lets a command that turns a member on switch the one
	// that is on off first; without it, such a command is rejected.
	BreakBeforeMake bool `yaml:"break_before_make,omitempty"`
	// DeadTime is the least time all members stay off between one going
	// off and another coming on, e.g. 500ms.
	DeadTime time.Duration `yaml:"dead_time,omitempty"`

	line int
}

// ScopeRules configures one fence scope (a scope is named by its actuators'
// scope keys, or by an actuator's name).
type ScopeRules struct {
	Name string `yaml:"name"`
	// MaxTokenJump, if not zero, rejects a token more than this above the
	// scope's fence (reason token-jump), fence-only commands included.
	MaxTokenJump uint64 `yaml:"max_token_jump,omitempty"`
	// Safe, if set, is the scope's dead-man (see actuator.Safe); its
	// state is also the state a trip sends the scope to.
	Safe *Safe `yaml:"safe,omitempty"`
	// Trip, if set, is an input level that sends the scope to its safe
	// state and holds it there until a reset command (actuator.Options.Trips).
	Trip *Level `yaml:"trip,omitempty"`

	line int
}

// Input configures one digital input: a header pin (Pin) or a line of
// another GPIO chip (Chip and Line), as an actuator's output.
type Input struct {
	Name string `yaml:"name"`
	Pin  string `yaml:"pin,omitempty"`
	Chip string `yaml:"chip,omitempty"`
	Line string `yaml:"line,omitempty"`
	// Pull is the line's bias: none (the default), up or down.
	Pull string `yaml:"pull,omitempty"`
	// Debounce is how long a new level must last before it counts.
	Debounce time.Duration `yaml:"debounce,omitempty"`
	// Edge says which changes are published and acted on: both (the
	// default), rising or falling.
	Edge string `yaml:"edge,omitempty"`

	line   int
	output string
}

// Line returns the input's line as boards name it: its header pin or its
// chip line.
func (in *Input) Output() string { return in.output }

// Level names an input and a level of it: high or low.
type Level struct {
	Input string `yaml:"input"`
	Level string `yaml:"level"`
}

func (l *Level) rule() *actuator.InputLevel {
	if l == nil {
		return nil
	}
	return &actuator.InputLevel{Input: l.Input, High: l.Level == "high"}
}

// Trips returns the scopes' trips as package actuator takes them.
func (c *Config) Trips() map[string]actuator.InputLevel {
	m := map[string]actuator.InputLevel{}
	for _, s := range c.Scopes {
		if s.Trip != nil {
			m[s.Name] = *s.Trip.rule()
		}
	}
	return m
}

// Safe configures a scope's dead-man: its outputs go to State when no
// command raised its fence for After, or, with OnDisconnect, when the
// broker connection is lost.
type Safe struct {
	After        time.Duration `yaml:"after,omitempty"`
	State        string        `yaml:"state,omitempty"` // off (the default) or on
	OnDisconnect bool          `yaml:"on_disconnect,omitempty"`
}

// SafeRules returns the scopes' dead-men as package actuator takes them.
func (c *Config) SafeRules() map[string]actuator.Safe {
	m := map[string]actuator.Safe{}
	for _, s := range c.Scopes {
		if s.Safe != nil {
			m[s.Name] = s.Safe.rule()
		}
	}
	return m
}

func (s *Safe) rule() actuator.Safe {
	st := fence.StateOff
	if s.State == "on" {
		st = fence.StateOn
	}
	return actuator.Safe{After: s.After, State: st, OnDisconnect: s.OnDisconnect}
}

// Rules returns the scopes' rules as package actuator takes them.
func (c *Config) Rules() map[string]fence.Rules {
	m := make(map[string]fence.Rules, len(c.Scopes))
	for _, s := range c.Scopes {
		m[s.Name] = fence.Rules{MaxJump: s.MaxTokenJump}
	}
	return m
}

// Specs returns the actuators as package actuator takes them.
func (c *Config) Specs() []actuator.Spec {
	specs := make([]actuator.Spec, 0, len(c.Actuators))
	for _, a := range c.Actuators {
		specs = append(specs, actuator.Spec{Name: a.Name, Scope: a.Scope, PinName: a.output, ActiveLow: a.ActiveLow, Boot: actuator.Boot(a.Boot),
			Kind: actuator.Kind(a.Kind), Pulse: a.Pulse, MaxPulse: a.MaxPulse, MaxOn: a.MaxOn, Requires: a.Requires.rule()})
	}
	return specs
}

// Locks returns the interlocks as package fence takes them.
func (c *Config) Locks() []fence.Interlock {
	var out []fence.Interlock
	for _, g := range c.Interlocks {
		out = append(out, fence.Interlock{Name: g.Name, Members: g.Actuators, BreakBeforeMake: g.BreakBeforeMake, DeadTime: g.DeadTime})
	}
	return out
}

// HTTPAddr returns the JSON API address, "" if disabled.
func (c *Config) HTTPAddr() string {
	if c.HTTP == nil {
		return DefaultHTTP
	}
	return *c.HTTP
}

// Marshal writes c as a configuration document that Parse reads back to
// the same configuration, with header (if any) as a leading comment. It is
// how programs (the simulator) write configurations: every value is
// quoted where YAML needs it.
func (c *Config) Marshal(header string) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return b.Bytes(), nil
}

// Load reads and checks the configuration file at path, and reads the
// files it names (mqtt.tls's, mqtt.password_file): a file it cannot use
// is an error at its key's line.
func Load(path string) (*Config, error) {
	c, err := LoadWithoutFiles(path)
	if err != nil {
		return nil, err
	}
	if err := c.readSecurity(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// LoadWithoutFiles is Load without reading the files the configuration
// names, for checking a configuration on another machine than the
// gateway's. Relative paths are made relative to the file's directory.
func LoadWithoutFiles(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range append([]*string{&c.Store, &c.MQTT.PasswordFile}, c.MQTT.TLS.files()...) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	unknownKey  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	duplicateKy = regexp.MustCompile(`^line (\d+): mapping key "([^"]*)" already defined at line (\d+)$`)
)

// Parse checks a configuration document. Relative paths are left as they
// are, and no file it names is read: Load reads them (see MQTT.Security).
//
// Every problem is reported once, at the line to edit: the document is
// parsed into a node tree first, which a walker checks against Config
// (duplicate, unknown and misspelt keys, values of the wrong shape or
// type), and only what passes is decoded and checked.
func Parse(b []byte) (*Config, error) {
	if err := pemBlock(b); err != nil {
		return nil, err
	}
	if err := checkUTF8(b); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, errEmpty
	} else if err != nil {
		return nil, syntaxError(b, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document; put everything in one")
	}
	w := newWalker()
	if !w.document(&doc) {
		return nil, w.err()
	}
	var c Config
	if err := doc.Decode(&c); err != nil {
		// The walker removed what does not decode; this is a bug.
		return nil, friendly(err)
	}
	lines := itemLines(&doc, "actuators")
	for i := range c.Actuators {
		if i < len(lines) {
			c.Actuators[i].line = lines[i]
		}
	}
	lines = itemLines(&doc, "interlocks")
	for i := range c.Interlocks {
		if i < len(lines) {
			c.Interlocks[i].line = lines[i]
		}
	}
	lines = itemLines(&doc, "scopes")
	for i := range c.Scopes {
		if i < len(lines) {
			c.Scopes[i].line = lines[i]
		}
	}
	lines = itemLines(&doc, "inputs")
	for i := range c.Inputs {
		if i < len(lines) {
			c.Inputs[i].line = lines[i]
		}
	}
	lines = itemLines(&doc, "controllers")
	for i := range c.Controllers {
		if i < len(lines) {
			c.Controllers[i].line = lines[i]
		}
	}
	w.checked(&c, c.check())
	if err := w.err(); err != nil {
		return nil, err
	}
	c.lines = w.lines
	return &c, nil
}

// checkUTF8 reports the first byte of b that is not UTF-8, at its line
// and column (in bytes): yaml.v3 says only "invalid leading UTF-8 octet",
// at the line where the construct around it starts.
func checkUTF8(b []byte) error {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			line := 1 + bytes.Count(b[:i], []byte("\n"))
			col := i - bytes.LastIndexByte(b[:i], '\n')
			return problem{line, fmt.Sprintf("byte 0x%02x at column %d is not UTF-8: save the file as UTF-8 (a configuration is text; an editor that wrote Latin-1 or UTF-16 may have done this)", b[i], col)}
		}
		i += n
	}
	return nil
}

func friendly(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if s := unknownKey.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: unknown key %q", s[1], s[2])
		} else if s := duplicateKy.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: key %q is already set at line %s", s[1], s[2], s[3])
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// itemLines returns the line of each item of the top-level list key.
func itemLines(root *yaml.Node, key string) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.SequenceNode {
			var lines []int
			for _, n := range m.Content[i+1].Content {
				lines = append(lines, n.Line)
			}
			return lines
		}
	}
	return nil
}

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
	} else if err := checkBroker(c.MQTT.Broker); err != nil {
		bad("mqtt.broker %q: %v", redacted(c.MQTT.Broker), err)
	}
	errs = append(errs, c.checkSecurity()...)
	if c.MQTT.TopicPrefix == "" {
		c.MQTT.TopicPrefix = wire.DefaultPrefix
	} else if !topicPrefix(c.MQTT.TopicPrefix) {
		bad("mqtt.topic_prefix %q: no wildcards (+ #), no leading, trailing or double /", c.MQTT.TopicPrefix)
	}
	if ha := c.HomeAssistant; ha != nil && ha.DiscoveryPrefix != "" && !topicPrefix(ha.DiscoveryPrefix) {
		bad("home_assistant.discovery_prefix %q: no wildcards (+ #), no leading, trailing or double / (Home Assistant's default is homeassistant)", ha.DiscoveryPrefix)
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
	names := nameSet{}
	pins := map[string]string{}
	for i := range c.Actuators {
		a := &c.Actuators[i]
		where := itemWhere("actuator", i, a.line, a.Name)
		if msg := names.check(a.Name, a.line, "name is required", " (it is a topic level)"); msg != "" {
			bad("%s: %s", where, msg)
		}
		given, g, err := a.resolveOutput()
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
		if boot, err := actuator.ParseBoot(a.Boot); err != nil {
			bad("%s: %v", where, strings.TrimPrefix(err.Error(), "actuator: "))
		} else {
			a.Boot = string(boot)
			spec := actuator.Spec{Name: a.Name, Boot: boot, Kind: actuator.Kind(a.Kind), Pulse: a.Pulse, MaxPulse: a.MaxPulse, MaxOn: a.MaxOn, Requires: a.Requires.rule()}
			if err := actuator.CheckKind(spec); err != nil {
				bad("%s: %v", where, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "actuator: "), a.Name+": "))
			}
		}
		if a.Scope == "" {
			a.Scope = a.Name
		} else if !nameRE.MatchString(a.Scope) {
			bad("%s: scope %q: use letters, digits, - and _ only", where, a.Scope)
		}
	}
	var locks []fence.Interlock // the interlocks checked so far, together
	for i, g := range c.Locks() {
		where := fmt.Sprintf("interlocks[%d]", i)
		if l := c.Interlocks[i].line; l > 0 {
			where = fmt.Sprintf("line %d: interlock %q", l, g.Name)
		}
		if g.Name != "" && !nameRE.MatchString(g.Name) {
			bad("%s: name: use letters, digits, - and _ only", where)
			continue
		}
		if err := actuator.CheckInterlocks(c.Specs(), append(locks, g)); err != nil {
			msg := strings.TrimPrefix(err.Error(), "actuator: ")
			bad("%s: %s", where, strings.TrimPrefix(msg, "interlock "+g.Name+": "))
			continue
		}
		locks = append(locks, g)
	}
	errs = append(errs, c.checkInputs()...)
	errs = append(errs, c.checkScopes()...)
	errs = append(errs, c.checkSigning()...)
	return errors.Join(errs...)
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
// name (hint explains why), and not taken by an earlier item. It returns
// what is wrong, or "" after adding the name.
func (n nameSet) check(name string, line int, missing, hint string) string {
	switch {
	case name == "":
		return missing
	case !nameRE.MatchString(name):
		return "name: use letters, digits, - and _ only" + hint
	case n[name] > 0:
		return fmt.Sprintf("name is already used at line %d", n[name])
	}
	n[name] = max(line, 1)
	return ""
}

// topicPrefix reports whether p may begin MQTT topic names: no wildcards,
// no leading, trailing or double /.
func topicPrefix(p string) bool {
	return !strings.ContainsAny(p, "+#") && !strings.HasPrefix(p, "/") && !strings.HasSuffix(p, "/") && !strings.Contains(p, "//")
}

func checkBroker(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // without the URL, which may hold a password
		}
		return err
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss":
	default:
		return fmt.Errorf("scheme %q: want tcp://host:port, or ssl://host:port for TLS (or mqtt, mqtts, tls, ws, wss)", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host; want e.g. tcp://127.0.0.1:1883")
	}
	if u.Port() == "" && u.Scheme != "ws" && u.Scheme != "wss" {
		return errors.New("no port; want e.g. tcp://127.0.0.1:1883")
	}
	return nil
}

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
		if msg := names.check(in.Name, in.line, "name is required", " (it is a topic level)"); msg != "" {
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
					errs = append(errs, fmt.Errorf("%s: %s", where, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "actuator: "), "scope "+s.Name+": ")))
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
func redacted(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…" + s[i:]
	}
	return s
}
