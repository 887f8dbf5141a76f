//go:build nosim

package main

// startBenchBroker: the Raspberry Pi build (-tags nosim) has no embedded
// broker, so gateway bench needs --broker there.
func startBenchBroker() (url string, stop func(), err error) {
	return "", nil, usageErr("this build has no embedded MQTT broker (it is the Raspberry Pi build): " +
		"give --broker tcp://127.0.0.1:1883, a Mosquitto on this machine (set_tcp_nodelay true in mosquitto.conf)")
}
