package service

import (
	"sync"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// events is the one place where what the gateway does fans out to those
// who follow it. The store (OnCommit), the bank (Options.Changed and
// Observer), the inputs and the link (Lost) feed it; the metrics, the
// decision log, the event stream (GET /api/events), the link (retained
// states and inputs) and the bank's dead-man (Disconnected) listen.
//
// A listener is added during start-up by the phase that makes it, before
// the phase that starts its feeder: the lists are not changed once the
// gateway runs, so feeding them takes no lock. Only the event stream's
// subscribers come and go (Subscribe). No listener may block: they run
// on the decision path, or in paho's goroutines.
type events struct {
	committed []func(took time.Duration, writes int)
	decided   []func(actuator.Event)
	admitted  []func(took time.Duration, commands int)
	driven    []func(actuator string, took time.Duration, err error)
	changed   []func([]fence.Output)
	inputs    []func(wire.InputState)
	lost      []func(error)

	subMu sync.Mutex // guards subs
	subs  map[chan actuator.Event]struct{}
}

// Subscribe implements httpapi.Source: a channel of decisions, for GET
// /api/events, and a function that ends the subscription.
func (ev *events) Subscribe(buf int) (<-chan actuator.Event, func()) {
	ch := make(chan actuator.Event, buf)
	ev.subMu.Lock()
	if ev.subs == nil {
		ev.subs = make(map[chan actuator.Event]struct{})
	}
	ev.subs[ch] = struct{}{}
	ev.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			ev.subMu.Lock()
			delete(ev.subs, ch)
			ev.subMu.Unlock()
		})
	}
}

// stream hands a decision to the event stream's subscribers. It never
// blocks the decision: a subscriber that falls more than its buffer
// behind misses events.
func (ev *events) stream(e actuator.Event) {
	ev.subMu.Lock()
	defer ev.subMu.Unlock()
	for ch := range ev.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// observe adds the funcs of o (an actuator.Observer) that are set.
func (ev *events) observe(o *actuator.Observer) {
	if o.Decided != nil {
		ev.decided = append(ev.decided, o.Decided)
	}
	if o.Admitted != nil {
		ev.admitted = append(ev.admitted, o.Admitted)
	}
	if o.Driven != nil {
		ev.driven = append(ev.driven, o.Driven)
	}
}

// observer is the bank's feed (actuator.Options.Observer).
func (ev *events) observer() *actuator.Observer {
	return &actuator.Observer{
		Decided: func(e actuator.Event) {
			for _, f := range ev.decided {
				f(e)
			}
		},
		Admitted: func(took time.Duration, commands int) {
			for _, f := range ev.admitted {
				f(took, commands)
			}
		},
		Driven: func(name string, took time.Duration, err error) {
			for _, f := range ev.driven {
				f(name, took, err)
			}
		},
	}
}

// commit is the store's feed (fencelog.Options.OnCommit).
func (ev *events) commit(took time.Duration, writes int) {
	for _, f := range ev.committed {
		f(took, writes)
	}
}

// change is the bank's feed of recorded states (actuator.Options.Changed).
func (ev *events) change(outputs []fence.Output) {
	for _, f := range ev.changed {
		f(outputs)
	}
}

// input is the inputs' feed: an input's level, recorded.
func (ev *events) input(in wire.InputState) {
	for _, f := range ev.inputs {
		f(in)
	}
}

// lose is the link's feed: the broker connection was lost
// (mqttlink.Options.Lost).
func (ev *events) lose(err error) {
	for _, f := range ev.lost {
		f(err)
	}
}
