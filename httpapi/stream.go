package httpapi

import (
	"sync"

	"github.com/fencegate/fencegate/actuator"
)

// Stream hands the bank's decisions to the subscribers of GET /api/events:
// feed it with Decided (an actuator.Observer's), and read it with
// Subscribe (a Source's). Its zero value is ready to use.
type Stream struct {
	mu   sync.Mutex // guards subs
	subs map[chan actuator.Event]struct{}
}

// Decided hands e to every subscriber. It never blocks a decision: a
// subscriber that falls more than its buffer behind misses events.
func (s *Stream) Decided(e actuator.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// Subscribe returns a channel of decisions, buffered for buf, and a
// function that ends the subscription.
func (s *Stream) Subscribe(buf int) (<-chan actuator.Event, func()) {
	ch := make(chan actuator.Event, buf)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = make(map[chan actuator.Event]struct{})
	}
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, ch)
			s.mu.Unlock()
		})
	}
}
