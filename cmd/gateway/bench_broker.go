//go:build !nosim

package main

import (
	"fmt"

	"github.com/fencegate/fencegate/mqttbroker"
)

// startBenchBroker starts the embedded broker for gateway bench on a free
// loopback port.
func startBenchBroker() (url string, stop func(), err error) {
	b, err := mqttbroker.Start("127.0.0.1:0", nil)
	if err != nil {
		return "", nil, fmt.Errorf("bench: embedded broker: %w", err)
	}
	return b.URL(), func() { b.Close() }, nil
}
