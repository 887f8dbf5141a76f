package service

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/wire"
)

// inputOf returns the board's input that the configuration names name
// (b is a boards.Board, or a boards.Opening).
func inputOf(cfg *config.Config, b interface {
	Input(string) (boards.Input, error)
}, name string) (boards.Input, error) {
	for _, in := range cfg.Inputs {
		if in.Name == name {
			return b.Input(in.Output())
		}
	}
	return nil, fmt.Errorf("no input %q in the configuration", name)
}

// outputLines are the configuration's outputs as boards take them, at no
// level yet (package actuator's boot rule decides them: Bank.Lines).
func outputLines(cfg *config.Config) []boards.Line {
	var out []boards.Line
	for _, a := range boardActuators(cfg) {
		out = append(out, boards.Line{Pin: a.Output(), ActiveLow: a.ActiveLow})
	}
	return out
}

// boardActuators are the actuators whose outputs are lines of the board,
// in configuration order: not those on a Modbus bus or a PWM channel,
// which boards never see.
func boardActuators(cfg *config.Config) []*config.Actuator {
	var out []*config.Actuator
	for i := range cfg.Actuators {
		if a := &cfg.Actuators[i]; a.Modbus == nil && a.PWM == nil {
			out = append(out, &cfg.Actuators[i])
		}
	}
	return out
}

// onBoard reports whether the named actuator's output is a line of the
// board.
func onBoard(cfg *config.Config, actuator string) bool {
	for _, a := range boardActuators(cfg) {
		if a.Name == actuator {
			return true
		}
	}
	return false
}

// inputLines are the configuration's inputs as boards take them.
func inputLines(cfg *config.Config) []boards.InputLine {
	var out []boards.InputLine
	for _, in := range cfg.Inputs {
		out = append(out, boards.InputLine{Pin: in.Output(), Pull: boards.Pull(in.Pull), Debounce: in.Debounce, Edge: boards.Edge(in.Edge)})
	}
	return out
}

// inputs carries the board's inputs to the bank (trips, and each input's
// recorded change count) and the gateway's events (the link's retained
// level).
type inputs struct {
	cfg    *config.Config
	log    *slog.Logger
	bank   *actuator.Bank
	events *events

	mu     sync.Mutex
	latest map[string]wire.InputState
}

// Inputs implements httpapi.InputSource: the inputs as last published.
func (ins *inputs) Inputs() []httpapi.Input {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	out := []httpapi.Input{}
	for _, in := range ins.cfg.Inputs {
		s := ins.latest[in.Name]
		pull := in.Pull
		if pull == "" {
			pull = "none"
		}
		out = append(out, httpapi.Input{Name: in.Name, Pin: in.Output(), Pull: pull, Level: s.Level, Seq: s.Seq, ChangedAt: s.ChangedAt})
	}
	return out
}

// changed handles a change the board reported (in order per input).
func (ins *inputs) changed(e boards.InputEvent) {
	name := ins.cfg.Inputs[e.Input].Name
	ins.log.Info("input changed", "input", name, "level", levelWord(e.High))
	ins.publish(name, e.High)
}

// publish tells the bank the input's level, which records it, and
// publishes it.
func (ins *inputs) publish(name string, high bool) {
	rec, err := ins.bank.InputChanged(name, high)
	if err != nil {
		ins.log.Error("record input", "input", name, "err", err)
		return
	}
	st := wire.InputState{Input: name, Level: levelWord(high), Seq: rec.Seq, ChangedAt: rec.ChangedAt}
	ins.mu.Lock()
	if ins.latest == nil {
		ins.latest = map[string]wire.InputState{}
	}
	ins.latest[name] = st
	ins.mu.Unlock()
	ins.events.input(st)
}

// start publishes every input's level as it is now.
func (ins *inputs) start(board boards.Board) error {
	for _, in := range ins.cfg.Inputs {
		i, err := board.Input(in.Output())
		if err != nil {
			return err
		}
		high, err := i.Level()
		if err != nil {
			return fmt.Errorf("service: input %s: %w", in.Name, err)
		}
		ins.publish(in.Name, high)
	}
	return nil
}

func levelWord(high bool) string {
	if high {
		return "high"
	}
	return "low"
}
