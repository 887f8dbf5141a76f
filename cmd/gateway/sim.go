//go:build !nosim

// The simulator: "gateway sim" and "gateway sim scenario", with the embedded
// broker. Builds with the nosim tag (the Raspberry Pi packages of make dist
// and make deb) leave this file out, and with it packages sim, scenario and
// mqttbroker; sim_nosim.go answers there instead.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/mqttbroker"
	"github.com/fencegate/fencegate/mqttlink"
	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/sim"
	"github.com/fencegate/fencegate/wire"
)

// simUsage is the simulator's part of the top-level usage.
const simUsage = `  gateway sim [flags]                  run the simulator: embedded broker, dashboard
  gateway sim scenario NAME            play a scenario against the simulator (exit 0 on PASS)
`

func defaultSimDir() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state")
		} else {
			dir = os.TempDir()
		}
	}
	return filepath.Join(dir, "fencegate", "sim")
}

// defaultSimHTTP is the dashboard's address unless --http says otherwise,
// and the simulator that gateway sim scenario looks for unless --sim does:
// where a gateway's own API would be.
const defaultSimHTTP = config.DefaultHTTP

type simFlags struct {
	listen, external, httpAddr, dir, id, level *string
	stepDelay                                  *time.Duration
}

func addSimFlags(fs *flag.FlagSet, dir string) simFlags {
	return simFlags{
		listen:    fs.String("mqtt", "127.0.0.1:1883", "address of the embedded MQTT broker"),
		external:  fs.String("broker", "", "use this broker (e.g. tcp://127.0.0.1:1883) instead of the embedded one"),
		httpAddr:  fs.String("http", defaultSimHTTP, "address of the dashboard"),
		dir:       fs.String("dir", dir, "the simulator's directory: fence store, latch, generated configuration; one simulator per directory"),
		id:        fs.String("id", "sim", "gateway id, used in topics"),
		level:     fs.String("log-level", "warn", "log level: debug, info, warn, error"),
		stepDelay: fs.Duration("step-delay", 1200*time.Millisecond, "pause between the steps of scenarios started from the dashboard"),
	}
}

func startSim(ctx context.Context, f simFlags, stderr io.Writer) (*sim.Sim, error) {
	log, err := newLogger(stderr, *f.level, "text")
	if err != nil {
		return nil, err
	}
	gw, err := gatewayCommand()
	if err != nil {
		return nil, err
	}
	if err := probeBroker(ctx, *f.external); err != nil {
		return nil, err
	}
	s, err := sim.Start(ctx, sim.Options{MQTTAddr: *f.listen, Broker: *f.external, HTTPAddr: *f.httpAddr,
		Dir: *f.dir, GatewayID: *f.id, Gateway: gw, Logger: log, StepDelay: *f.stepDelay})
	var inUse *sim.DirInUseError
	switch {
	case errors.As(err, &inUse):
		// A configuration error, as for a second gateway process with the
		// same id: the same command fails the same way until the other
		// simulator stops or this one gets a directory of its own.
		return nil, configErr(fmt.Errorf("%s: stop it, or start this one with --dir %s", inUse.Describe(), inUse.Dir+"-2"))
	case errors.Is(err, sim.ErrGatewayStopped):
		return nil, configErr(err)
	case errors.Is(err, mqttbroker.ErrAddrInUse):
		return nil, fmt.Errorf("%s is already in use (is a Mosquitto running?): %s for another port, or --broker tcp://%s to use that broker", *f.listen, startWith("--mqtt", *f.listen), *f.listen)
	case errors.Is(err, sim.ErrHTTPInUse):
		return nil, fmt.Errorf("%s is already in use (is another simulator running? see http://%s): %s", *f.httpAddr, *f.httpAddr, startWith("--http", *f.httpAddr))
	}
	return s, err
}

// probeBroker connects to the simulator's --broker, if it names one,
// once, as gateway check --broker does (mqttlink.Probe), and says why it
// cannot, as gateway run logs it: the simulator would otherwise wait for
// its gateway to come online on a broker it never reaches, saying nothing.
func probeBroker(ctx context.Context, broker string) error {
	if broker == "" {
		return nil
	}
	err := mqttlink.Probe(ctx, mqttlink.Options{Broker: broker, ClientID: fmt.Sprintf("fencegate-sim-probe-%d-%d", os.Getpid(), time.Now().UnixNano()),
		Settings: mqttsec.Settings{Names: sendNames, Broker: broker}})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("--broker %s: %w; start it, or start the simulator without --broker (it has a broker of its own)", mqttsec.Redacted(broker), err)
	}
	return err
}

func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "scenario" {
		return cmdScenario(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("sim", "[flags]", fmt.Sprintf(`
Runs the simulator: an embedded MQTT broker (or --broker), the real gateway
on the sim board as a supervised child process, and the dashboard.
"gateway sim scenario NAME" plays a scenario (%s).`, strings.Join(scenario.Names(), ", ")))
	f := addSimFlags(fs.FlagSet, defaultSimDir())
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	if *f.external != "" {
		var err error
		if *f.external, err = fs.broker(*f.external); err != nil {
			return err
		}
	}
	s, err := startSim(ctx, f, stderr)
	if err != nil && ctx.Err() != nil {
		return nil // Ctrl-C (or SIGTERM) while it started: stopped as asked, no error
	}
	if err != nil {
		return err
	}
	defer s.Close()
	host, port := brokerHostPort(s.BrokerURL)
	kind := " (embedded)"
	if *f.external != "" {
		kind = ""
	}
	fmt.Fprintf(stdout, `fencegate simulator ready
  dashboard: http://%s
  broker:    %s%s
  store:     %s (latch: %s)
  actuators: pump, valve, fan + heater (one scope: climate),
             vent-open + vent-close (one scope: vent; interlocked: at most one on),
             door (a pulse output, on expander mcp23017@20), sprinkler (a 5 s dead-man),
             lamp (a relay of a Modbus TCP module),
             dimmer (a set-point on a register of that module)
  inputs:    window-closed (the heater requires it high), overheat (trips climate off)
try:
  mosquitto_pub -h %s -p %s -q 1 -t %s/%s/pump/set -m '{"id":"try-1","token":42,"state":"on","holder":"me"}'
  %s sim scenario paused-controller%s     (or press a scenario button on the dashboard)
stop with Ctrl-C
`, s.HTTPAddr, s.BrokerURL, kind, s.Store, s.Latch, host, port, wire.DefaultPrefix, *f.id, invokedAs(), simFlag(s.HTTPAddr))
	<-ctx.Done()
	return nil
}

func cmdScenario(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sim scenario", "NAME [--sim URL] [--delay D] | --list", fmt.Sprintf(`
Plays a scenario (%s) against the simulator at --sim, or, if none answers
there, on a simulator of its own on free ports; prints the steps and a last
line PASS or FAIL, and exits 0 on PASS, 1 on FAIL.`, strings.Join(scenario.Names(), ", ")))
	simURL := fs.String("sim", "http://"+defaultSimHTTP, "the running simulator to play against; if none answers there, one is started on free ports")
	delay := fs.Duration("delay", 800*time.Millisecond, "pause between steps")
	list := fs.Bool("list", false, "print the scenarios' names, one a line, and play none (make scenarios plays each)")
	pos, err := fs.parseInterspersed(args, stdout, stderr)
	if err != nil {
		return err
	}
	if *list {
		if len(pos) > 0 {
			return usageErr("--list plays no scenario: drop %q", pos)
		}
		fmt.Fprintln(stdout, strings.Join(scenario.Names(), "\n"))
		return nil
	}
	if len(pos) > 1 {
		return usageErr("one scenario at a time (got %q)", pos)
	}
	var name string
	if len(pos) == 1 {
		name = pos[0]
	}
	if name == "" {
		return usageErr("which scenario? %s", strings.Join(scenario.Names(), ", "))
	}
	found := false
	for _, n := range scenario.Names() {
		found = found || n == name
	}
	if !found {
		return usageErr("unknown scenario %q (scenarios: %s)", name, strings.Join(scenario.Names(), ", "))
	}
	url := strings.TrimSuffix(*simURL, "/")
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = scenario.FetchSim(pctx, url)
	cancel()
	if err != nil {
		dir, err := os.MkdirTemp("", "fencegate-scenario-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintf(stdout, "no simulator at %s; starting one on free ports\n", url)
		port := "127.0.0.1:0"
		f := simFlags{listen: &port, external: new(string), httpAddr: &port, dir: &dir, id: ptr("sim"), level: ptr("warn"), stepDelay: delay}
		s, err := startSim(ctx, f, io.Discard)
		if err != nil {
			return err
		}
		defer s.Close()
		url = "http://" + s.HTTPAddr
	} else {
		fmt.Fprintf(stdout, "playing against the simulator at %s (watch it on its dashboard)\n", url)
	}
	v, err := scenario.Run(ctx, name, scenario.Env{SimURL: url, Delay: *delay, Out: stdout})
	if err != nil {
		return err
	}
	if !v.Pass {
		return &exitError{exitFailure, nil} // the FAIL line says why
	}
	return nil
}

// simFlag is the --sim flag a scenario needs to find the simulator whose
// dashboard is at addr: none for the default address.
func simFlag(addr string) string {
	if addr == defaultSimHTTP {
		return ""
	}
	return " --sim http://" + addr
}

// simDashboard is the dashboard address of the simulator using dir, ""
// if none does.
func simDashboard(dir string) string { return sim.Dashboard(dir) }

func ptr[T any](v T) *T { return &v }

func brokerHostPort(u string) (string, string) {
	rest := strings.TrimPrefix(u, "tcp://")
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		return rest[:i], rest[i+1:]
	}
	return rest, "1883"
}
