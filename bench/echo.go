package bench

import (
	"context"
	"fmt"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// echo stands in for the gateway to measure the broker's floors: one MQTT
// connection, as the gateway's, subscribed to every command topic of its
// own gateway id; it decodes each command and publishes an "applied"
// answer where the gateway would (QoS 1): on the reply topic the command
// names, else on its actuator's result topic; with no store and no output. The
// controllers cannot tell it from a gateway, so the floors and the
// gateway's figures come from the same code.
type echo struct {
	c      mqtt.Client
	topics wire.Topics
	commit func() error // if set, run before each answer (the composed floor)
	failed error        // the first commit that failed; read once serve ended
	closed sync.Once
	in     chan mqtt.Message
	stop   chan struct{}
	done   chan struct{}
}

// echoQueue holds the commands the echo has not answered yet: more than
// any benchmark keeps in flight, so that paho's handler never waits.
const echoQueue = 1 << 16

// startEcho starts an echo; commit, if not nil, runs before each answer,
// and a command whose commit failed is answered failed.
func startEcho(ctx context.Context, broker, clientID string, topics wire.Topics, commit func() error) (*echo, error) {
	c, err := connect(ctx, broker, clientID)
	if err != nil {
		return nil, err
	}
	e := &echo{c: c, topics: topics, commit: commit, in: make(chan mqtt.Message, echoQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go e.serve()
	if err := waitToken(ctx, c.Subscribe(topics.SetFilter(), 1, func(_ mqtt.Client, m mqtt.Message) { e.in <- m })); err != nil {
		e.close()
		return nil, fmt.Errorf("bench: echo: subscribe to %s: %w", topics.SetFilter(), err)
	}
	return e, nil
}

func (e *echo) serve() {
	defer close(e.done)
	for {
		var m mqtt.Message
		select {
		case m = <-e.in:
		case <-e.stop:
			return
		}
		name, ok := e.topics.Actuator(m.Topic())
		if !ok {
			continue
		}
		req, err := wire.DecodeRequest(name, m.Payload())
		c, to := req.Command, req.Reply
		if to == "" {
			to = e.topics.Result(name)
		}
		r := fence.Result{ID: c.ID, Actuator: name, Outcome: fence.Applied, Command: c.Fence, Fence: c.Fence, State: c.State}
		if err != nil {
			r.Outcome, r.Error = fence.Rejected, err.Error()
		} else if e.commit != nil {
			if err := e.commit(); err != nil {
				r.Outcome, r.Error = fence.Failed, err.Error()
				if e.failed == nil {
					e.failed = err
				}
			}
		}
		e.c.Publish(to, 1, false, wire.EncodeResult(r))
	}
}

func (e *echo) close() {
	e.closed.Do(func() {
		close(e.stop)
		<-e.done
		e.c.Disconnect(50)
	})
}

// end closes the echo and returns the first commit that failed, if one did.
func (e *echo) end() error {
	e.close()
	return e.failed
}
