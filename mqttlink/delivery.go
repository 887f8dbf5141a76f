package mqttlink

import (
	"context"
	"errors"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// deliver starts a worker for each of work's queues, which decides its
// actuator's commands in order until work is closed (wg counts the
// workers), and returns the dispatcher that puts the commands paho
// delivers in their queues.
func (l *Link) deliver(ctx context.Context, work *backlog, wg *sync.WaitGroup) mqtt.MessageHandler {
	for name := range work.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := max(1, min(maxBatch, l.h.MaxBatch(name)))
			if name == "" {
				batch = 1 // the unknown actuators' queue holds many names
			}
			for {
				ds, ok := work.take(name, batch)
				if !ok {
					return
				}
				ms := make([]mqtt.Message, len(ds))
				for i, d := range ds {
					ms[i] = d.m
				}
				l.serve(ctx, ds[0].name, ms)
				if n := work.done(ds); n > 0 {
					l.refetch(n)
				}
			}
		}()
	}
	// Commands redelivered from the persistent session can arrive before
	// the subscription of this connection is in place, so the dispatcher is
	// also the default handler: no command is ever dropped unanswered. They
	// wait in their actuator's queue until the link takes commands.
	return func(_ mqtt.Client, m mqtt.Message) {
		if m.Topic() == l.t.Probe() {
			l.delivered(string(m.Payload()))
			m.Ack()
			return
		}
		name, ok := l.t.Actuator(m.Topic())
		if ok {
			l.delivered("")
		}
		if !ok {
			if m.Topic() == l.t.Instance() {
				l.guard.received(m)
			}
			m.Ack() // not a command topic of ours
			return
		}
		if work.put(name, m) {
			if testHookQueued != nil {
				testHookQueued(name, m.Payload())
			}
		} else {
			// The reader must never block: it also delivers the claims
			// and probes the link may be waiting for. Unacknowledged, the
			// command comes again when the link reconnects, as soon as the
			// backlog is empty (see BacklogBytes).
			l.conn.dropped(name)
		}
	}
}

// refetch closes the connection, so that paho reconnects and the broker
// delivers again the n commands dropped while the backlog was full: MQTT
// redelivers a session's unacknowledged messages at a reconnect, and a
// broker keeps sending a connected client new ones meanwhile.
func (l *Link) refetch(n int) {
	l.log.Warn("reconnecting to receive again the commands dropped while the backlog was full", "dropped", n)
	l.conn.refetching(n)
	l.redial(errRefetch)
}

// redial closes the connection, so that paho connects anew; its reader
// reads why.
func (l *Link) redial(why error) {
	l.mu.Lock()
	c := l.netConn
	l.mu.Unlock()
	if c != nil {
		c.abort(why)
	}
}

// errRefetch is what paho reads from a connection the link closed to
// receive again the commands dropped from a full backlog.
var errRefetch = errors.New("mqttlink: the link closed the connection to receive again the commands dropped from its full backlog")

// maxBatch bounds the commands of one actuator that go to the core
// together.
const maxBatch = 64
