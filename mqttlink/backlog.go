package mqttlink

import (
	"slices"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// BacklogBytes bounds the memory the commands received and not yet decided
// may take, all actuators together. The reader never blocks (the claims
// and probes the link waits for after a connect come on the same
// connection), so a command beyond the budget is dropped unacknowledged;
// once every queue is empty again the link reconnects, and the broker
// delivers the dropped commands again (MQTT redelivers a session's
// unacknowledged messages at a reconnect). 16 MiB holds some 30,000
// ordinary commands, more than the 10,000 the recommended Mosquitto
// configuration queues for a gateway that is down.
const BacklogBytes = 16 << 20

var backlogBytes = BacklogBytes // tests make it small

// msgOverhead is what a command held costs beyond its topic and payload:
// paho's message, the delivery and the slice slot, rounded up.
const msgOverhead = 256

func msgCost(m mqtt.Message) int { return len(m.Topic()) + len(m.Payload()) + msgOverhead }

// delivery is a command received for actuator name, in the queue of that
// actuator, or in queue "" if it is not one of the gateway's.
type delivery struct {
	queue, name string
	m           mqtt.Message
}

// backlog holds the commands received and not yet decided: a queue per
// actuator, each decided in order by its own worker, within one budget.
type backlog struct {
	mu      sync.Mutex
	queues  map[string]*actQueue
	bytes   int // held, queued or being decided
	dropped int // dropped since the link last fetched them again
	closed  bool
}

type actQueue struct {
	items []delivery
	busy  bool          // its worker is deciding one
	wake  chan struct{} // 1-buffered: items were added, or the backlog closed
}

func newBacklog(names []string) *backlog {
	b := &backlog{queues: make(map[string]*actQueue, len(names))}
	for _, n := range names {
		b.queues[n] = &actQueue{wake: make(chan struct{}, 1)}
	}
	return b
}

// put queues m, a command for actuator name, for that actuator's worker
// (the unknown actuators' if it has none: rejected in turn), or drops it
// (false) when the budget is spent or the backlog is closed. It never
// blocks.
func (b *backlog) put(name string, m mqtt.Message) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := delivery{queue: name, name: name, m: m}
	q, ok := b.queues[name]
	if !ok {
		d.queue, q = "", b.queues[""]
	}
	cost := msgCost(m)
	if b.closed || b.bytes+cost > backlogBytes {
		b.dropped++
		return false
	}
	b.bytes += cost
	q.items = append(q.items, d)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take waits for the next commands of actuator name, and takes every one
// queued, up to max; false once the backlog is closed and that queue is
// empty.
func (b *backlog) take(name string, max int) ([]delivery, bool) {
	q := b.queues[name]
	for {
		b.mu.Lock()
		if len(q.items) > 0 {
			n := min(len(q.items), max)
			ds := slices.Clone(q.items[:n])
			clear(q.items[:n])
			q.items = q.items[n:]
			if len(q.items) == 0 {
				q.items = nil // let the array go
			}
			q.busy = true
			b.mu.Unlock()
			return ds, true
		}
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.wake
	}
}

// done releases ds, taken together and handled. It returns how many
// commands were dropped since the last time it did, when these were the
// last commands held (and none were dropped since): the time for the link
// to fetch them again.
func (b *backlog) done(ds []delivery) (refetch int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range ds {
		b.bytes -= msgCost(d.m)
	}
	b.queues[ds[0].queue].busy = false
	if b.dropped == 0 || b.closed {
		return 0
	}
	for _, q := range b.queues {
		if q.busy || len(q.items) > 0 {
			return 0
		}
	}
	n := b.dropped
	b.dropped = 0
	return n
}

// close wakes every worker: each takes what its queue still holds, then
// ends.
func (b *backlog) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, q := range b.queues {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}
