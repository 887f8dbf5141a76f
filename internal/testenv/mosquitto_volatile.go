package testenv

import "testing"

// MosquittoVolatile is MosquittoPersistent without persistence: a broker
// that Stop and Start restart on the same port with nothing of before, no
// session, no queued or unacknowledged message, no retained message, as a
// broker configured without persistence (Mosquitto's default) after a
// restart. It is killed when t ends.
func MosquittoVolatile(t testing.TB) *PersistentBroker {
	t.Helper()
	return restartable(t, func(*PersistentBroker) string { return "persistence false\n" })
}
