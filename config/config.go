// Package config reads and checks a gateway's YAML configuration.
//
// Loading is strict: unknown keys, duplicate keys, duplicate actuator names,
// pins used twice and missing required keys are errors that name the line
// and say what to change. Nothing is guessed.
package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
	"github.com/fencegate/fencegate/fence"
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
	// Modbus are the Modbus buses (a TCP connection, or a serial port)
	// whose coils and registers actuators name (see modbus.go).
	Modbus []ModbusBus `yaml:"modbus,omitempty"`
	// RequireSignature makes every actuator take signed commands only
	// (see signing.go).
	RequireSignature bool `yaml:"require_signature,omitempty"`
	// Controllers are the controllers whose signed commands the gateway
	// takes.
	Controllers []Controller `yaml:"controllers,omitempty"`
	// HomeAssistant, if present, announces the actuators to Home
	// Assistant through its MQTT discovery, as read-only entities.
	HomeAssistant *HomeAssistant `yaml:"home_assistant,omitempty"`

	lines lineMap // the line of each key and item, by path (mqtt.tls.ca_file)
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
	// Modbus, instead of a pin, puts the output on a coil or a holding
	// register of a device of one of Config.Modbus.
	Modbus *ModbusOutput `yaml:"modbus,omitempty"`
	// PWM, instead of a pin, puts a set-point output on a PWM channel.
	PWM *PWMOutput `yaml:"pwm,omitempty"`
	// A set-point output's (kind: setpoint) range, ramp and safe
	// set-point, in percent: commands outside Min..Max (but 0, off) and
	// steps faster than MaxRate per second are refused; SafeDuty is what
	// its scope's dead-man and trip set it to. Its boot may be a
	// set-point (boot: 30).
	Min      *Percent `yaml:"min,omitempty"`
	Max      *Percent `yaml:"max,omitempty"`
	MaxRate  *Percent `yaml:"max_rate,omitempty"`
	SafeDuty *Percent `yaml:"safe_duty,omitempty"`

	bootDuty fence.Duty // boot: N of a set-point output
	output   string     // canonical: Pin, the chip line, or the Modbus output
	poll     time.Duration
}

// Output returns the actuator's output by its canonical name: its header
// pin, its chip line ("mcp23017:3", pinmap.ChipLine), or its Modbus
// output (modbusconf.Name).
func (a *Actuator) Output() string { return a.output }

// resolveOutput returns a's output as configured, for messages, and its
// canonical name: a header pin, a chip line, or an output on a Modbus bus.
func (c *Config) resolveOutput(a *Actuator) (given, canonical string, err error) {
	if a.PWM != nil {
		return pwmOutput(a)
	}
	if a.Modbus != nil {
		return c.modbusOutput(a)
	}
	return resolveLine(a.Pin, a.Chip, a.Line)
}

// outputKey is the key that names a's output, for errors about it.
func (a *Actuator) outputKey() string {
	switch {
	case a.PWM != nil:
		return "pwm"
	case a.Modbus != nil:
		return "modbus"
	case a.Pin != "":
		return "pin"
	}
	return "chip"
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

// scope is a's fence scope: the one it names, or, if none, its own (an
// actuator alone in its scope).
func (a *Actuator) scope() string {
	if a.Scope == "" {
		return a.Name
	}
	return a.Scope
}

// Specs returns the actuators as package actuator takes them.
func (c *Config) Specs() []actuator.Spec {
	specs := make([]actuator.Spec, 0, len(c.Actuators))
	for i := range c.Actuators {
		specs = append(specs, c.Actuators[i].spec())
	}
	return specs
}

// spec is a as package actuator takes it.
func (a *Actuator) spec() actuator.Spec {
	s := actuator.Spec{Name: a.Name, Scope: a.scope(), PinName: a.output, ActiveLow: a.ActiveLow, Boot: actuator.Boot(a.Boot),
		Kind: actuator.Kind(a.Kind), Pulse: a.Pulse, MaxPulse: a.MaxPulse, MaxOn: a.MaxOn, Requires: a.Requires.rule(),
		Poll: a.poll, Min: a.Min.duty(), Max: a.Max.duty(), MaxRate: a.MaxRate.duty(), BootDuty: a.bootDuty, SafeDuty: a.SafeDuty.duty()}
	if a.PWM != nil {
		s.MinFrequency, s.MaxFrequency = uint32(max(a.PWM.MinFrequency, 0)), uint32(max(a.PWM.MaxFrequency, 0))
	}
	return s
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
