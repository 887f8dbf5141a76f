// Command gateway is fencegate: an MQTT gateway that drives actuators only
// for commands whose fencing token passes the durably recorded fence.
//
// Usage:
//
//	gateway run --config gateway.yaml [--init]   run the gateway
//	gateway sim [flags]                          run the laptop simulator (embedded broker, dashboard)
//	gateway sim scenario NAME                    play a scenario; exit 0 on PASS, 1 on FAIL
//	gateway send [flags] on|off|fence            send one tokenized command; exit 0 applied/duplicate, 3 stale, 4 rejected, 5 failed, 6 timeout
//	gateway init --config gateway.yaml           create the fence store once; fails if it exists
//	gateway check --config gateway.yaml          check a configuration and exit
//	gateway inspect --store fence.db             print fences, states and the audit trail
//	gateway version
//
// Exit codes: 0 success, 1 failure at run time, 2 bad usage or configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

const usage = `gateway: fencegate, fenced MQTT commands for physical actuators

Usage:
  gateway run --config FILE [--init]   run the gateway (--init creates a missing store)
  gateway sim [flags]                  run the simulator: embedded broker, dashboard (see gateway sim -h)
  gateway sim scenario NAME            play a scenario against the simulator (exit 0 on PASS)
  gateway send [flags] on|off|fence    send one tokenized command (see gateway send -h)
  gateway init --config FILE           create the fence store once (fails if it exists)
  gateway check --config FILE          check a configuration and exit
  gateway inspect --store FILE         print fences, states and recent audit entries
  gateway version                      print the version

Exit codes: 0 success, 1 failure at run time, 2 bad usage or configuration;
gateway send also 3 stale, 4 rejected, 5 failed, 6 timeout.
`

// errUsage marks errors that exit with status 2.
type errUsage struct{ error }

func (e errUsage) Unwrap() error { return e.error }

func usageErr(format string, a ...any) error { return errUsage{fmt.Errorf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errScenarioFailed) {
			fmt.Fprintln(os.Stderr, "gateway:", err)
		}
		var ue errUsage
		var ec exitCode
		switch {
		case errors.As(err, &ue):
			os.Exit(2)
		case errors.As(err, &ec):
			os.Exit(ec.code)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageErr("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, stderr)
	case "sim":
		return cmdSim(ctx, rest, stdout, stderr)
	case "send":
		return cmdSend(ctx, rest, stdout, stderr)
	case "check":
		return cmdCheck(rest, stdout, stderr)
	case "init":
		return cmdInit(rest, stdout, stderr)
	case "inspect":
		return cmdInspect(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageErr("unknown command %q", cmd)
}

func version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return "fencegate gateway " + v
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
