package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/fencegate/fencegate/habridge"
)

// cmdHABridge runs the Home Assistant bridge: a fenced controller that
// Home Assistant's switches command (package habridge).
func cmdHABridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ha-bridge", "--gateway ID --etcd URL --actuators A,B [flags]", `
Lets Home Assistant command a gateway's actuators the fenced way. It
announces a switch per actuator through Home Assistant's MQTT discovery;
the switches publish "on" or "off" on the bridge's topics
(fencegate-ha/ID/ACTUATOR/set), never the gateway's. For each command the
bridge holds the etcd lease of the actuator's fence scope, sends a
tokenized command with the lease's token, and reports the gateway's
answer back (fencegate-ha/ID/ACTUATOR/outcome, retained: the switch's
attributes). A stale answer means another controller took the scope: the
bridge acquires the lease again and sends once more.

The bridge keeps a scope's lease for --idle after its last command, then
lets it go, so that other controllers of the scope can have it. It runs
until interrupted.`)
	conn := addBrokerFlags(fs)
	gw := fs.String("gateway", "", "gateway id (required)")
	etcdURL := fs.String("etcd", "", "etcd endpoints, comma-separated (required)")
	acts := fs.String("actuators", "", "the actuators Home Assistant may command, comma-separated (required)")
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
	case *acts == "":
		return usageErr("--actuators is required: name the actuators Home Assistant may command")
	case *ttl < 1:
		return usageErr("--ttl %d: want 1 or more seconds", *ttl)
	case *wait <= 0 || *idle <= 0:
		return usageErr("--wait %v, --idle %v: want durations above 0", *wait, *idle)
	}
	var names []string
	for _, a := range strings.Split(*acts, ",") {
		if a = strings.TrimSpace(a); a == "" || strings.ContainsAny(a, "/+#") {
			return usageErr("--actuators %q: want actuator names, comma-separated", *acts)
		}
		names = append(names, a)
	}
	o, err := conn.options(*gw)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return err
	}
	err = habridge.Run(ctx, habridge.Options{Client: o, Etcd: strings.Split(*etcdURL, ","), TTL: *ttl, Actuators: names,
		Name: *name, DiscoveryPrefix: *discovery, BridgePrefix: *bridgePrefix, Wait: *wait, Idle: *idle, Version: versionNumber(),
		Logger: log.With(slog.String("component", "ha-bridge"))})
	return dialErr(err)
}
