package client

import (
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// guardedStore is paho's store of unacknowledged messages, which paho
// publishes again, by itself, when it has reconnected. It keeps SendUnder's
// copies from that replay once their lease is lost or their SendUnder has
// returned: a copy published while the lease was held, but not
// acknowledged before the broker went away, would otherwise be published
// after the reconnect with no check of the lease, however long after its
// deadline. SendUnder's own resend after a reconnect checks the lease;
// Send's copies (no lease) are left to paho as before.
//
// A copy left out of the replay keeps its message id claimed in paho
// until the client is closed: one id of 65535 per such copy.
type guardedStore struct {
	mqtt.Store

	mu   sync.Mutex
	live map[string]*guardedSend // by payload: SendUnder calls under way
	keys map[string]*guardedSend // by store key: their copies in the store
}

// A guardedSend is one SendUnder call's command.
type guardedSend struct {
	g    Guard
	over bool // SendUnder returned: no copy of it may be published any more
}

func newGuardedStore() *guardedStore {
	return &guardedStore{Store: mqtt.NewMemoryStore(), live: map[string]*guardedSend{}, keys: map[string]*guardedSend{}}
}

// guard registers payload as published under g until the returned
// function is called, when SendUnder returns.
func (s *guardedStore) guard(payload []byte, g Guard) (done func()) {
	gs := &guardedSend{g: g}
	s.mu.Lock()
	s.live[string(payload)] = gs
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		gs.over = true
		if s.live[string(payload)] == gs {
			delete(s.live, string(payload))
		}
	}
}

func (s *guardedStore) Put(key string, m packets.ControlPacket) {
	if p, ok := m.(*packets.PublishPacket); ok {
		s.mu.Lock()
		if gs := s.live[string(p.Payload)]; gs != nil {
			s.keys[key] = gs
		}
		s.mu.Unlock()
	}
	s.Store.Put(key, m)
}

// Get is how paho reads a message to publish again after a reconnect: a
// guarded copy whose lease is lost, or whose SendUnder returned, is
// deleted instead, and paho skips it.
func (s *guardedStore) Get(key string) packets.ControlPacket {
	s.mu.Lock()
	gs := s.keys[key]
	over := gs != nil && gs.over
	s.mu.Unlock()
	if gs != nil && (over || gs.g.Check() != nil) {
		s.Del(key)
		return nil
	}
	return s.Store.Get(key)
}

func (s *guardedStore) Del(key string) {
	s.mu.Lock()
	delete(s.keys, key)
	s.mu.Unlock()
	s.Store.Del(key)
}

func (s *guardedStore) Reset() {
	s.mu.Lock()
	clear(s.keys)
	s.mu.Unlock()
	s.Store.Reset()
}
