package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fencegate/fencegate/habridge"
)

// cmdHABridge runs the Home Assistant bridge: a fenced controller that
// Home Assistant's switches and numbers command (package habridge).
func cmdHABridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ha-bridge", "--gateway ID --etcd URL --actuators A,B [--setpoints C,D] [flags]", `
Lets Home Assistant command a gateway's actuators the fenced way. It
announces a switch per actuator (--actuators) and a number, 0 to 100 %,
per set-point output (--setpoints) through Home Assistant's MQTT
discovery; they publish "on" or "off", or the set-point, on the bridge's
topics (fencegate-ha/ID/ACTUATOR/set), never the gateway's. For each command the
bridge holds the etcd lease of the actuator's fence scope, sends a
tokenized command with the lease's token, and reports the gateway's
answer back (fencegate-ha/ID/ACTUATOR/outcome, retained: the entity's
attributes). A stale answer means another controller took the scope: the
bridge acquires the lease again and sends once more.

The bridge keeps a scope's lease for --idle after its last command, then
lets it go, so that other controllers of the scope can have it. It runs
until interrupted.`)
	conn := addBrokerFlags(fs)
	gw := fs.String("gateway", "", "gateway id (required)")
	etcdURL := fs.String("etcd", "", "etcd endpoints, comma-separated (required)")
	acts := fs.String("actuators", "", "the actuators Home Assistant may switch on and off, comma-separated")
	setpoints := fs.String("setpoints", "", "the set-point outputs Home Assistant may set, in percent, comma-separated")
	name := fs.String("name", "ha-bridge", "the bridge's name: the holder of its commands in the audit trail")
	ttl := fs.Int("ttl", 10, "lease time to live in seconds")
	wait := fs.Duration("wait", 30*time.Second, "how long a command waits for a scope's lease another controller holds")
	idle := fs.Duration("idle", time.Minute, "how long the bridge keeps a scope's lease after its last command")
	discovery := fs.String("discovery-prefix", "", "Home Assistant's discovery prefix (default homeassistant)")
	bridgePrefix := fs.String("bridge-prefix", "", "the bridge's topics' prefix (default fencegate-ha)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	format := fs.String("log-format", "text", "log format: text or json")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	switch {
	case *gw == "":
		return usageErr("--gateway is required")
	case *etcdURL == "":
		return usageErr("--etcd is required: the bridge takes its tokens from etcd leases")
	case *acts == "" && *setpoints == "":
		return usageErr("--actuators or --setpoints is required: name the actuators Home Assistant may command")
	case *ttl < 1:
		return usageErr("--ttl %d: want 1 or more seconds", *ttl)
	case *wait <= 0 || *idle <= 0:
		return usageErr("--wait %v, --idle %v: want durations above 0", *wait, *idle)
	}
	names, err := actuatorNames("actuators", *acts)
	if err != nil {
		return err
	}
	spNames, err := actuatorNames("setpoints", *setpoints)
	if err != nil {
		return err
	}
	for _, a := range spNames {
		if slices.Contains(names, a) {
			return usageErr("%s is in --actuators and --setpoints: a switch (on, off) or a set-point (percent), not both", a)
		}
	}
	o, err := conn.options(*gw)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return err
	}
	err = habridge.Run(ctx, habridge.Options{Client: o, Etcd: strings.Split(*etcdURL, ","), TTL: *ttl, Actuators: names, Setpoints: spNames,
		Name: *name, DiscoveryPrefix: *discovery, BridgePrefix: *bridgePrefix, Wait: *wait, Idle: *idle, Version: versionNumber(),
		Logger: log.With(slog.String("component", "ha-bridge"))})
	return dialErr(err)
}

// actuatorNames reads the comma-separated actuator names of --flag ("": none).
func actuatorNames(flag, list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var names []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" || strings.ContainsAny(a, "/+#") {
			return nil, usageErr("--%s %q: want actuator names, comma-separated", flag, list)
		}
		names = append(names, a)
	}
	return names, nil
}
