package mqttlink

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// statePublisher publishes each actuator's newest recorded state, retained.
// The core hands it states in fence order per scope (under the scope's
// lock); it keeps only the newest per actuator and publishes from one
// goroutine, so the last state published for an actuator is always its
// newest, however a publication is delayed.
type statePublisher struct {
	l    *Link
	kick chan struct{}

	mu     sync.Mutex // guards the fields below
	latest map[string]fence.Output
	dirty  map[string]bool
	// inputs are the inputs' newest levels, by name, and which of them
	// wait for publication.
	inputs      map[string]wire.InputState
	dirtyInputs map[string]bool
}

func newStatePublisher(l *Link) *statePublisher {
	return &statePublisher{l: l, kick: make(chan struct{}, 1), latest: map[string]fence.Output{}, dirty: map[string]bool{},
		inputs: map[string]wire.InputState{}, dirtyInputs: map[string]bool{}}
}

// input takes an input's new level and publishes it at once.
func (p *statePublisher) input(in wire.InputState) {
	p.mu.Lock()
	if cur, ok := p.inputs[in.Input]; !ok || cur.Seq <= in.Seq {
		p.inputs[in.Input] = in
		p.dirtyInputs[in.Input] = true
	}
	p.mu.Unlock()
	p.poke()
}

// update takes new states. They are published at the next poke: a
// command's worker pokes once its answer is on its way, so that the answer
// comes before the states it caused; a slow tick publishes states that no
// command caused.
func (p *statePublisher) update(outputs []fence.Output) {
	p.mu.Lock()
	for _, o := range outputs {
		p.latest[o.Actuator] = o
		p.dirty[o.Actuator] = true
	}
	p.mu.Unlock()
}

// republish marks every known state for publication (after a connect).
func (p *statePublisher) republish() {
	p.mu.Lock()
	for name := range p.latest {
		p.dirty[name] = true
	}
	for name := range p.inputs {
		p.dirtyInputs[name] = true
	}
	p.mu.Unlock()
	p.poke()
}

func (p *statePublisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run publishes until ctx ends. States wait while the link does not take
// commands (not connected, or in conflict): the connect that ends the wait
// republishes them all.
func (p *statePublisher) run(ctx context.Context) {
	tick := time.NewTicker(stateTick)
	defer tick.Stop()
	for {
		select {
		case <-p.kick:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if !p.l.waitReady(ctx) {
			return
		}
		p.mu.Lock()
		if len(p.dirty) == 0 && len(p.dirtyInputs) == 0 {
			p.mu.Unlock()
			continue
		}
		batch := make([]fence.Output, 0, len(p.dirty))
		for name := range p.dirty {
			batch = append(batch, p.latest[name])
		}
		clear(p.dirty)
		ins := make([]wire.InputState, 0, len(p.dirtyInputs))
		for name := range p.dirtyInputs {
			ins = append(ins, p.inputs[name])
		}
		clear(p.dirtyInputs)
		p.mu.Unlock()
		sort.Slice(batch, func(i, j int) bool { return batch[i].Actuator < batch[j].Actuator })
		p.l.mu.Lock()
		c := p.l.client
		p.l.mu.Unlock()
		for _, o := range batch {
			if testHookStatePublish != nil {
				testHookStatePublish(o)
			}
			// QoS 0 (see serve): a state lost with the connection is
			// published again at the next connect, as all of them are.
			if _, ok := p.l.publish(ctx, c, p.l.t.State(o.Actuator), 0, true, wire.EncodeState(o)); !ok {
				return // stopping: the next start publishes every state
			}
		}
		for _, in := range ins {
			if _, ok := p.l.publish(ctx, c, p.l.t.Input(in.Input), 0, true, wire.EncodeInputState(in)); !ok {
				return
			}
		}
	}
}

// stateTick is how often states that no command caused are published.
const stateTick = time.Second

// testHookStatePublish, if set (by tests), is called with each state
// message's output just before it is published.
var testHookStatePublish func(fence.Output)
