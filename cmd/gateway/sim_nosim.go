//go:build nosim

// The Raspberry Pi build (make dist, make deb) has no simulator: the nosim
// tag leaves out sim.go, and with it packages sim, scenario and mqttbroker
// (the embedded broker and its dependencies). "gateway sim" says so here.

package main

import (
	"context"
	"errors"
	"io"
)

// simUsage is the simulator's line of the top-level usage: not in this build.
const simUsage = `  gateway sim                          not in this build (the Raspberry Pi build): see gateway sim -h
`

// errNoSim is what "gateway sim" answers in a build without the simulator.
var errNoSim = errors.New("this build has no simulator: it is the Raspberry Pi build; run the simulator from source with `make sim` or a build without -tags nosim")

// cmdSim answers "gateway sim" and "gateway sim scenario" with errNoSim
// (exit 64), whatever their arguments, and -h with a usage that says so
// (exit 0).
func cmdSim(_ context.Context, args []string, stdout, _ io.Writer) error {
	name := "sim"
	if len(args) > 0 && args[0] == "scenario" {
		name, args = "sim scenario", args[1:]
	}
	fs := newFlags(name, "(not in this build)", `
This gateway was built without the simulator (-tags nosim): it is the
Raspberry Pi build of make dist and the .deb packages, which leaves out the
embedded MQTT broker, the simulator and its scenarios. Run the simulator on
a laptop from source with "make sim", or build the gateway without
-tags nosim ("make build").`)
	for _, a := range args {
		switch a {
		case "--":
			return usageErr("%w", errNoSim)
		case "-h", "-help", "--help":
			fs.usage(stdout)
			return errHelp
		}
	}
	return usageErr("%w", errNoSim)
}

// simDashboard finds no simulator: this build runs none.
func simDashboard(string) string { return "" }
