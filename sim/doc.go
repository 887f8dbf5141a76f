// Package sim is fencegate's laptop simulator: the gateway on the sim board
// as a supervised child process, an embedded MQTT broker, the dashboard, an
// unfenced twin output for side-by-side demonstrations, and scenarios that
// play the fencing stories against it with simulated controllers.
//
// Nothing here is reachable from `gateway run`: the unfenced twin and the
// crash point exist only in the simulator.
package sim
