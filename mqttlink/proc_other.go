//go:build !linux

package mqttlink

import "time"

// processStart is unknown outside Linux: a claim from this host is then
// treated like one from another host.
func processStart(int) (time.Time, bool) { return time.Time{}, false }

func processTicks(int) (int64, bool) { return 0, false }

func bootID() string { return "" }

func machineID() string { return "" }

// processesKnown says whether processStart can tell.
const processesKnown = false
