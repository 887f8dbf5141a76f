package testenv

import "testing"

// QueuedMessages is the max_queued_messages of the test Mosquittos: a
// broker keeps at most that many commands for a gateway that is down (or
// busy) and drops the rest, 1000 with Mosquitto's default. Tests publish
// bursts while gateways restart, so their brokers keep far more than the
// docs' recommendation.
const QueuedMessages = 100000

// MosquittoConf starts a real Mosquitto as Mosquitto does, but with conf
// (mosquitto.conf lines, after the listener) as its whole configuration,
// and returns its URL once it listens. It is killed when t ends.
func MosquittoConf(t testing.TB, conf string) string {
	t.Helper()
	url, _ := mosquitto(t, conf)
	return url
}
