// Command brokerd runs the embedded MQTT broker (package mqttbroker) in a
// process of its own for testenv.EmbeddedBroker, which builds it without
// the race detector: the broker's own data races (see mqttbroker's package
// comment) then fail no test of ours, while every test still talks to the
// real embedded broker over loopback.
//
// It listens on a free port of 127.0.0.1, prints the broker's URL
// (tcp://127.0.0.1:PORT) as the first line on stdout, and serves until its
// stdin closes or it is killed. The broker's log (debug level) goes to
// stderr. It is a test tool: nothing ships it.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/fencegate/fencegate/mqttbroker"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := mqttbroker.Start("127.0.0.1:0", log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "brokerd: %v\n", err)
		os.Exit(1)
	}
	if _, err := fmt.Println(b.URL()); err != nil {
		fmt.Fprintf(os.Stderr, "brokerd: telling the address: %v\n", err)
		os.Exit(1)
	}
	io.Copy(io.Discard, os.Stdin) // until the test process closes it, or dies
	b.Close()
}
