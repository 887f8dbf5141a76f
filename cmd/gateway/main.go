// Command gateway is fencegate: an MQTT gateway that drives actuators only
// for commands whose fencing token passes the durably recorded fence.
//
// Usage:
//
//	gateway run --config gateway.yaml [--init]   run the gateway
//	gateway sim [flags]                          run the laptop simulator (embedded broker, dashboard)
//	gateway sim scenario NAME                    play a scenario; exit 0 on PASS, 1 on FAIL
//	gateway send [flags] on|off|fence|pulse|duty|reset  send one tokenized command; exit 0 applied/duplicate, 3 stale, 4 rejected, 5 failed, 6 timeout, 7 output not as asked
//	gateway init --config gateway.yaml           create the fence store once; fails if it exists
//	gateway check --config gateway.yaml          check a configuration, the store, the board, as run would
//	gateway inspect --store fence.db             print fences and the audit trail (read-only)
//	gateway keygen --out ctl-a                   make a controller's key pair (ctl-a.key, ctl-a.pub) for signed commands
//	gateway acl --config gateway.yaml --controller ctl-a   print the Mosquitto ACL for the gateway and its controllers
//	gateway wifi --from wifi.txt --out FILE      check a card's wifi.txt and write wpa_supplicant's configuration for it
//	gateway bench [--profile P]                  measure the gateway on this machine and disk, against its floors
//	gateway version
//
// Every command takes -h (or --help): it prints the command's usage and
// exits 0 without doing anything else.
//
// Exit codes: 0 success; 1 failure at run time (a supervisor should
// restart the gateway); 64 bad usage; 78 bad configuration, or a store that
// is missing, empty, damaged, not a store, another gateway's or not
// writable, or another gateway process with the same id, or (gateway sim)
// another simulator on the same --dir (restarting cannot fix these);
// gateway send also 3 stale,
// 4 rejected, 5 failed, 6 timeout, 7 applied or duplicate but the output is
// not as asked. Status 2 is the Go runtime's for a
// crash (a panic, a fatal signal): restart.
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

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/service"
)

// Exit codes; see the package comment. They follow sysexits.h where one
// fits, and stay clear of 2, which the Go runtime uses for crashes.
const (
	exitFailure = 1
	exitUsage   = 64 // EX_USAGE
	exitConfig  = 78 // EX_CONFIG
)

const usage = `gateway: fencegate, fenced MQTT commands for physical actuators

Usage:
  gateway run --config FILE [--init]   run the gateway (--init creates a missing store)
` + simUsage + `  gateway send [flags] on|off|fence|pulse|duty|reset
                                       send one tokenized command
  gateway init --config FILE --floor N|--floor-from-etcd URL|--new
                                       create the fence store once, with a floor (fails if it exists)
  gateway check --config FILE          check a configuration, its store and board, as run would
  gateway inspect --store FILE         print fences and recent audit entries (read-only)
  gateway audit --store FILE|--api URL print recent decisions, filtered; --follow a running gateway's
  gateway keygen --out PATH            make a controller's key pair for signed commands
  gateway acl --config FILE --controller NAME
                                       print the Mosquitto ACL for this gateway and its controllers
  gateway bridge --config FILE --site bridge.txt
                                       print the Mosquitto bridge to the site's broker (docs/site.md)
  gateway wifi --from wifi.txt [--out FILE]
                                       check a card's wifi.txt; write wpa_supplicant's configuration (docs/site.md)
  gateway ha-bridge --gateway ID --etcd URL --actuators A,B
                                       let Home Assistant's switches command actuators, fenced
  gateway bench [--profile P]          measure the gateway on this machine and disk (docs/performance.md)
  gateway version                      print the version

Every command takes -h for its own usage. Exit codes: 0 success, 1 failure
at run time, 64 bad usage, 78 bad configuration or store; gateway send also
3 stale, 4 rejected, 5 failed, 6 timeout, 7 output not as asked.
`

// exitError carries an exit status to main; its message, if any, is
// printed as "gateway: MESSAGE".
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr is a bad-usage error (exit 64).
func usageErr(format string, a ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, a...)}
}

// configErr marks err as a configuration error (exit 78).
func configErr(err error) error { return &exitError{exitConfig, err} }

// errHelp ends a command that printed its usage because it was asked to.
var errHelp = errors.New("help printed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err (if it has a message) and returns the exit status
// it means.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "gateway:", msg)
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case isConfigError(err):
		return exitConfig
	}
	return exitFailure
}

// isConfigError reports errors that a restart cannot fix: the operator
// must change the configuration or the installation.
func isConfigError(err error) bool {
	for _, target := range []error{fencelog.ErrNotExist, fencelog.ErrEmpty, fencelog.ErrNotStore,
		fencelog.ErrDamaged, fencelog.ErrFormat, fencelog.ErrOtherGateway, fencelog.ErrUnwritable, boards.ErrBoard, service.ErrStoreDir, service.ErrConflict} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageErr("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, stdout, stderr)
	case "sim":
		return cmdSim(ctx, rest, stdout, stderr)
	case "send":
		return cmdSend(ctx, rest, stdout, stderr)
	case "check":
		return cmdCheck(ctx, rest, stdout, stderr)
	case "init":
		return cmdInit(ctx, rest, stdout, stderr)
	case "ha-bridge":
		return cmdHABridge(ctx, rest, stdout, stderr)
	case "audit":
		return cmdAudit(ctx, rest, stdout, stderr)
	case "inspect":
		return cmdInspect(rest, stdout, stderr)
	case "keygen":
		return cmdKeygen(rest, stdout, stderr)
	case "acl":
		return cmdACL(ctx, rest, stdout, stderr)
	case "wifi":
		return cmdWiFi(ctx, rest, stdout, stderr)
	case "bridge":
		return cmdBridge(ctx, rest, stdout, stderr)
	case "bench":
		return cmdBench(ctx, rest, stdout, stderr)
	case "version":
		if err := newFlags("version", "", "Prints the version.").parse(rest, stdout, stderr); err != nil {
			return err
		}
		fmt.Fprintln(stdout, version())
		return nil
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && rest[0] != "help" && rest[0][0] != '-' {
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageErr("unknown command %q", cmd)
}

// version is the module version Go stamped into the binary: a tag, or a
// pseudo-version of the commit (make build and make dist stamp it).
func version() string {
	return "fencegate gateway " + versionNumber()
}

func versionNumber() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// newLogger makes the log of a command: at level and above, in format
// (text, slog's key=value lines, or json, one JSON object a line).
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, usageErr("--log-format %q: want text or json", format)
}
