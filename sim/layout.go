package sim

import (
	"time"

	"github.com/fencegate/fencegate/config"
)

// Actuator is one of the simulator's example outputs: on a header pin,
// on a line of one of the sim board's expanders (Chip and Line), or on a
// coil of the simulator's Modbus relay module (Coil), or a set-point on
// one of its holding registers (Register, 0 to Full).
type Actuator struct {
	Name, Pin, Scope, Boot string
	Chip, Line             string
	Coil                   *int
	Register               *int
	Full                   int
	// Kind "pulse" with its default Pulse and MaxPulse: a door strike.
	Kind            string
	Pulse, MaxPulse time.Duration
	// Requires is an input level without which it does not come on.
	Requires *config.Level
}

// Inputs are the simulator's example inputs, switches on its dashboard:
// window-closed (pulled up: closed until someone opens it), which the
// heater requires, and overheat (pulled down), which trips the climate
// scope (Scopes) to off.
var Inputs = []config.Input{
	{Name: "window-closed", Pin: "GPIO16", Pull: "up", Debounce: 20 * time.Millisecond},
	{Name: "overheat", Pin: "GPIO20", Pull: "down", Debounce: 20 * time.Millisecond},
}

// Actuators are the simulator's example outputs: fan and heater share one
// scope ("climate"), so one lease fences both; vent-open and vent-close are
// a motor's two directions, in one scope and interlocked (Interlocks): at
// most one of them is on; door is a door strike, a pulse output on an
// MCP23017 expander's line; sprinkler's scope has a dead-man (Scopes);
// lamp is a relay of a Modbus TCP module (ModbusBus), which the dashboard
// can cut the power of, or switch by its own button; dimmer is a
// set-point on a register of that module (0 to 1000 for 0 to 100 %).
var Actuators = []Actuator{
	{Name: "pump", Pin: "GPIO17", Boot: "last"},
	{Name: "valve", Pin: "GPIO27", Boot: "last"},
	{Name: "fan", Pin: "GPIO22", Scope: "climate", Boot: "last"},
	{Name: "heater", Pin: "GPIO23", Scope: "climate", Boot: "off", Requires: &config.Level{Input: "window-closed", Level: "high"}},
	{Name: "vent-open", Pin: "GPIO5", Scope: "vent", Boot: "off"},
	{Name: "vent-close", Pin: "GPIO6", Scope: "vent", Boot: "off"},
	{Name: "door", Chip: "mcp23017@20", Line: "GPA0", Kind: "pulse", Pulse: time.Second, MaxPulse: 5 * time.Second},
	{Name: "sprinkler", Pin: "GPIO24", Boot: "off"},
	{Name: "lamp", Coil: ptr(0), Boot: "last"},
	{Name: "dimmer", Register: ptr(1), Full: 1000, Boot: "last"},
}

// ModbusBus names the simulator's Modbus relay module's bus: a Modbus TCP
// module (unit 1) in the simulator's process, on a loopback port of its
// own, read back every ModbusPoll.
const (
	ModbusBus  = "relays"
	ModbusPoll = time.Second
)

func ptr[T any](v T) *T { return &v }

// Scopes are the simulator's scope rules: the sprinkler's dead-man sends
// it off when its holder has raised no fence for SprinklerDeadman; the
// overheat input trips the climate scope (fan and heater) to off.
var Scopes = []config.ScopeRules{
	{Name: "sprinkler", Safe: &config.Safe{After: SprinklerDeadman, State: "off"}},
	{Name: "climate", Trip: &config.Level{Input: "overheat", Level: "high"}, Safe: &config.Safe{State: "off"}},
}

// SprinklerDeadman is the sprinkler scope's dead-man time: short, so that
// the controller-vanishes scenario can be watched.
const SprinklerDeadman = 5 * time.Second

// Interlocks are the simulator's example interlocks: the vent motor's two
// directions. A command that would turn one on while the other is on is
// rejected; after one goes off, the other comes on no sooner than the dead
// time.
var Interlocks = []config.Interlock{
	{Name: "vent", Actuators: []string{"vent-open", "vent-close"}, DeadTime: 500 * time.Millisecond},
}
