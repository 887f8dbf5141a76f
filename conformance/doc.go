// Package conformance holds the suite that every fencegate client runs,
// whatever its language: the command encodings and signatures byte for
// byte (commands.json), what each answer means and what a controller does
// with it (answers.json), and the pause test, in which a controller of one
// language is paused after its lease's grant while one of another takes
// the scope over (see README.md).
//
// Its tests run the suite against the Go client, and run the Python and
// Node-RED clients' own tests and the pause test against real parts: a
// Mosquitto, an etcd and a gateway.
package conformance
