package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fencegate/fencegate/bench"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[--profile single|fleet|shared|storm|sdcard|all|soak] [flags]", fmt.Sprintf(`
Measures this gateway on this machine and disk, and the floors it is
bounded by, in one run: the broker's round trip and echo throughput
without the gateway, and one bbolt commit in the store's directory. Each
profile runs this program as a gateway (gateway run) on the sim board with
a fresh store in --store-dir, and MQTT controllers in this process; see
docs/performance.md for how to read the figures.

  single   1 actuator, 1 controller, one command at a time
  fleet    every controller owns an actuator and keeps --window commands
           in flight: 16 × 16 and 64 × 64, window 32
  shared   16 and 64 controllers all command the same 16 actuators, each
           command under a token of its own (applied, or stale), window
           32; counts the answers delivered per command (--shared-answers:
           on the shared result topics, as before reply topics)
  storm    16 scopes, a quarter with a flapping controller (9 stale
           commands in 10), window 8: the calm scopes' p99 with and without
  sdcard   the fleet (16 × 16) with every store commit slowed by
           --sdcard-delay; needs a build with -tags failpoints (make bench)
  soak     alone, not in all: 16 × 16, window 4, for --duration (default
           %v), with stale and duplicate commands, reconnects and event
           streams; samples the gateway's goroutines, heap and RSS every
           --sample-interval and exits 1 if they grew (make soak)

It starts an embedded MQTT broker unless --broker names one (the Raspberry
Pi build has none: give --broker). On a Raspberry Pi, give --store-dir on
the disk the real store uses (e.g. /var/lib/fencegate): the temporary
directory may be in memory.`, minutes(bench.DefaultSoakDuration)))
	profile := fs.String("profile", bench.All, "profiles to run, comma-separated: single, fleet, shared, storm, sdcard or all; or soak, alone")
	actuators := fs.Int("actuators", 0, fmt.Sprintf("actuators of every profile run (1 to %d; 0: the profile's)", bench.MaxActuators))
	controllers := fs.Int("controllers", 0, "controllers of every profile run, one actuator each but in shared (0: one per actuator; shared: 16 and 64)")
	sharedAnswers := fs.Bool("shared-answers", false, "controllers name no reply topic: every answer goes to its actuator's shared result topic, to every controller listening there")
	window := fs.Int("window", 0, "commands each controller keeps in flight (0: the profile's)")
	commands := fs.Int("commands", 0, "commands of each measured phase, shared among its controllers (instead of --duration)")
	duration := fs.Duration("duration", 0, fmt.Sprintf("length of each measured phase (default %v; the soak's: %s)", bench.DefaultDuration, minutes(bench.DefaultSoakDuration)))
	every := fs.Duration("sample-interval", 0, fmt.Sprintf("the soak's time between samples of the gateway (default %v)", bench.DefaultSampleInterval))
	warmup := fs.Duration("warmup", bench.DefaultWarmup, "warm-up before each measured phase")
	sdDelay := fs.Duration("sdcard-delay", bench.DefaultSDCardDelay, "the sdcard profile's slowed commit (an SD card's sync takes 10 to 20 ms)")
	broker := fs.String("broker", "", "use this MQTT broker (e.g. tcp://127.0.0.1:1883; allowing anonymous clients) instead of an embedded one")
	storeDir := fs.String("store-dir", "", "directory for the benchmark's stores, on the disk to measure (default: the temporary directory)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	var profiles []string
	for p := range strings.SplitSeq(*profile, ",") {
		if p = strings.TrimSpace(p); p != "" {
			profiles = append(profiles, p)
		}
	}
	if *warmup < 0 {
		return usageErr("--warmup %v: want 0 or more (see gateway bench -h)", *warmup)
	}
	if *warmup == 0 {
		*warmup = -1 // one command per controller
	}
	if *broker != "" {
		var err error
		if *broker, err = fs.broker(*broker); err != nil {
			return err
		}
	}
	gw, err := gatewayCommand()
	if err != nil {
		return err
	}
	o := bench.Options{Gateway: gw, Broker: *broker, StoreDir: *storeDir, Profiles: profiles,
		Actuators: *actuators, Controllers: *controllers, Window: *window, Commands: *commands, Duration: *duration,
		SampleInterval: *every, Warmup: *warmup, SDCardDelay: *sdDelay, CommitDelay: failpointsBuild, Version: versionNumber(),
		SharedAnswers: *sharedAnswers}
	if err := benchUsage(o.Check()); err != nil {
		return err
	}
	if isTerminal(stderr) {
		o.Progress = stderr
	}
	if *broker == "" {
		url, stop, err := startBenchBroker()
		if err != nil {
			return err
		}
		defer stop()
		o.Broker, o.BrokerName = url, "embedded"
	}
	start := time.Now()
	r, err := bench.Run(ctx, o)
	if err := benchUsage(err); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bench: interrupted after %v", time.Since(start).Round(time.Second))
		}
		return err
	}
	if *asJSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	return r.Err() // the soak's growth: exit 1
}

// minutes prints a whole number of minutes as people write it: 10m, not
// 10m0s.
func minutes(d time.Duration) string { return strings.TrimSuffix(d.String(), "0s") }

// benchUsage makes an error of package bench's options a usage error
// (exit 64); it returns other errors as they are.
func benchUsage(err error) error {
	if errors.Is(err, bench.ErrUsage) {
		return usageErr("%s (see gateway bench -h)", strings.TrimPrefix(err.Error(), bench.ErrUsage.Error()+": "))
	}
	return err
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
