// Package sim is fencegate's laptop simulator: the gateway on the sim board
// as a supervised child process, an embedded MQTT broker, the dashboard, an
// unfenced twin output for side-by-side demonstrations, and scenarios that
// play the fencing stories against it with simulated controllers.
//
// A simulator locks its directory before it writes anything or opens a
// port, so that a second one on the same directory fails at once
// ([DirInUseError]) instead of rewriting the first one's configuration.
// When the gateway process does not answer, the dashboard's proxy says why
// (restarting, or stopped after a configuration error) in a page in the
// dashboard's style, or a JSON error for /api/.
//
// Nothing here is reachable from `gateway run`: the unfenced twin and the
// crash point exist only in the simulator.
package sim
