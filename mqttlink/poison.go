package mqttlink

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"
)

// A poison message is a command whose answer the broker refuses by
// closing the gateway's connection (a topic or a size it will not take).
// The command is decided and recorded before its answer goes out, but it
// is acknowledged only after, so the broker delivers it again on the next
// connection, the answer goes out again, and the gateway would lose every
// connection to it, every actuator with it. Every topic the gateway
// publishes on is checked first (see send) and answers are bounded (see
// wire.MaxName), so no input known today does this; the guard is for
// what the checks miss (a broker's own limits).
//
// A command whose answer was written just before a connection was lost,
// or that the broker marks as sent before (DUP), is a suspect: it is
// answered alone, no other answer of the link going out meanwhile, and
// followed by a round trip (a QoS 1 probe, which the broker acknowledges
// only once it has taken the answer before it) before it is acknowledged.
// If the connection is lost during that, the command is poison: when it
// comes again it is decided as any command (a duplicate, since it was
// recorded), acknowledged without its answer, and logged; Status says so.
// One poison message costs the gateway two connections.
//
// Several at once would cost one connection each, with paho's backoff
// doubling between them. So a second loss on an answer alone within
// escalateWithin of the first escalates: for escalateFor after it, every
// suspect is set aside unanswered as poison is (the commands near the
// poison lose their answers, not their decisions: a controller that
// resends gets its answer), every other command is answered alone, and
// an answer as large as the smaller of the two lost is not published (a
// broker's packet limit is the likeliest cause; such a command is set
// aside too). A burst of poison messages costs the gateway a few
// connections, not one each: here 30 of them to three actuators cost 4
// to 6 (an answer that paho held when a connection broke goes out on
// the next one).
type poisonGuard struct {
	mu       sync.Mutex
	seed     maphash.Seed
	ring     [recentAnswers]written // the answers written last
	next     int
	suspects map[uint64]time.Time // when each was marked
	poison   map[uint64]time.Time
	alone    string       // the suspect being answered alone, described; "" for none
	lostOn   [2]time.Time // the last two losses on an answer alone, newest first
	sizes    [2]int       // the answers' sizes (as packets) at those losses
	n        int          // commands acknowledged unanswered
	last     string       // the newest of them, described
	lastAt   time.Time
}

// A verdict is how a command is answered.
type verdict int

const (
	answerNormally verdict = iota // with its batch
	answerAlone                   // alone, then proven
	setAside                      // not answered: decided and acknowledged
)

type written struct {
	key uint64
	at  time.Time
}

const (
	// recentAnswers is how many answers the guard remembers, and
	// blameWindow how long before a connection loss an answer's write
	// makes its command a suspect: a broker closes the connection as soon
	// as it reads the packet it refuses.
	recentAnswers = 256
	blameWindow   = time.Second
	// maxSuspects bounds each of the guard's sets, and forgetAfter how long
	// an entry is kept: a command the broker delivers again comes within
	// seconds of the reconnect.
	maxSuspects = 1024
	forgetAfter = time.Hour
	// escalateWithin: two losses on answers alone this close escalate;
	// escalateFor: how long after the last one it lasts.
	escalateWithin = time.Minute
	escalateFor    = time.Minute
)

func newPoisonGuard() *poisonGuard {
	return &poisonGuard{seed: maphash.MakeSeed(), suspects: map[uint64]time.Time{}, poison: map[uint64]time.Time{}}
}

// key identifies a command message: its actuator and payload.
func (g *poisonGuard) key(actuator string, payload []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(actuator)
	h.WriteByte(0)
	h.Write(payload)
	return h.Sum64()
}

// wrote notes that the answers to keys were written.
func (g *poisonGuard) wrote(keys []uint64) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		g.ring[g.next] = written{k, now}
		g.next = (g.next + 1) % recentAnswers
	}
}

// lost notes a lost connection: the commands answered within blameWindow
// before it become suspects. It returns what the loss may be blamed on,
// for people, or "".
func (g *poisonGuard) lost() string {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for i, w := range g.ring {
		if !w.at.IsZero() && now.Sub(w.at) <= blameWindow {
			add(g.suspects, w.key, now)
			n++
		}
		g.ring[i] = written{}
	}
	switch {
	case g.alone != "":
		return "the broker closed the connection on the answer to " + g.alone +
			": it refuses that answer; the command is recorded, and is set aside as a poison message when it comes again"
	case n > 0:
		return fmt.Sprintf("%d answers were written just before it; if the broker closed it on one of them, "+
			"that command is answered alone when it comes again, and set aside if the broker closes the connection again", n)
	}
	return ""
}

// verdict says how the command of key, marked DUP by the broker if dup,
// is answered.
func (g *poisonGuard) verdict(key uint64, dup bool) verdict {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	_, s := g.suspects[key]
	_, p := g.poison[key]
	escalated := g.escalatedLocked(now)
	switch {
	case p, escalated && (s || dup):
		return setAside
	case escalated || s || dup:
		return answerAlone
	}
	return answerNormally
}

// isPoison reports whether the command of key lost the gateway its
// connection while it was answered alone.
func (g *poisonGuard) isPoison(key uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, p := g.poison[key]
	return p
}

// answering notes that the suspect of description what is answered alone
// now ("" when it is done).
func (g *poisonGuard) answering(what string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.alone = what
}

// cleared notes that the answer to key went through.
func (g *poisonGuard) cleared(key uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.suspects, key)
}

// condemn notes that the connection was lost while key's answer, size
// bytes as a packet, went out alone.
func (g *poisonGuard) condemn(key uint64, size int) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.suspects, key)
	add(g.poison, key, now)
	g.lostOn[1], g.lostOn[0] = g.lostOn[0], now
	g.sizes[1], g.sizes[0] = g.sizes[0], size
}

// escalatedLocked reports whether the last two losses on answers alone
// came within escalateWithin, the last within escalateFor. g.mu must be
// held.
func (g *poisonGuard) escalatedLocked(now time.Time) bool {
	return !g.lostOn[1].IsZero() && g.lostOn[0].Sub(g.lostOn[1]) <= escalateWithin && now.Sub(g.lostOn[0]) <= escalateFor
}

// tooLarge reports whether, escalated, an answer of size bytes (as a
// packet) is as large as the smaller of the two the connection was lost
// on alone: a broker's packet limit is the likeliest cause, and a burst
// of such answers would cost a connection each, those not yet delivered
// included. Such an answer is not published; its command is set aside.
func (g *poisonGuard) tooLarge(size int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.escalatedLocked(time.Now()) && size >= min(g.sizes[0], g.sizes[1])
}

// setAside notes a command acknowledged without its answer.
func (g *poisonGuard) setAside(key uint64, what string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.poison, key)
	delete(g.suspects, key)
	g.n++
	g.last, g.lastAt = what, time.Now()
}

// status returns how many poison messages were set aside, and the newest.
func (g *poisonGuard) status() (n int, last string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n, g.last, g.lastAt
}

// add puts key in set at now, first making room: entries older than
// forgetAfter go, then, if the set is still full, any one.
func add(set map[uint64]time.Time, key uint64, now time.Time) {
	if len(set) >= maxSuspects {
		for k, at := range set {
			if now.Sub(at) > forgetAfter {
				delete(set, k)
			}
		}
		for k := range set {
			if len(set) < maxSuspects {
				break
			}
			delete(set, k)
		}
	}
	set[key] = now
}
