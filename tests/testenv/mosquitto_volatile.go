package testenv

import "testing"

// MosquittoVolatile is MosquittoPersistent without persistence: a broker
// that Stop and Start restart on the same port with nothing of before, no
// session, no queued or unacknowledged message, no retained message, as a
// broker configured without persistence (Mosquitto's default) after a
// restart. It is killed when t ends.
func MosquittoVolatile(t testing.TB) *PersistentBroker {
	t.Helper()
	return MosquittoWith(t, BrokerOptions{})
}

// Restartable is a kind of restartable broker, for tests that run with each.
type Restartable struct {
	Name       string
	Persistent bool // it keeps sessions and messages across a restart
	Start      func(testing.TB) *PersistentBroker
}

// RestartableBrokers returns MosquittoPersistent and MosquittoVolatile.
func RestartableBrokers() []Restartable {
	return []Restartable{
		{"persistent", true, MosquittoPersistent},
		{"without persistence", false, MosquittoVolatile},
	}
}
