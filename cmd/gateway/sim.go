package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/sim"
)

// simActuators are the simulator's example outputs: fan and heater are
// interlocked in one scope ("climate"), so one lease fences both.
var simActuators = []config.Actuator{
	{Name: "pump", Pin: "GPIO17", Boot: "last"},
	{Name: "valve", Pin: "GPIO27", Boot: "last"},
	{Name: "fan", Pin: "GPIO22", Boot: "last", Scope: "climate"},
	{Name: "heater", Pin: "GPIO23", Boot: "off", Scope: "climate"},
}

func defaultSimStore() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state")
		} else {
			dir = os.TempDir()
		}
	}
	return filepath.Join(dir, "fencegate", "sim", "fence.db")
}

func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sim", stderr)
	listen := fs.String("mqtt", "127.0.0.1:1883", "address of the embedded MQTT broker")
	external := fs.String("broker", "", "use this broker (e.g. tcp://127.0.0.1:1883) instead of the embedded one")
	httpAddr := fs.String("http", "127.0.0.1:8080", "address of the JSON API (\"\" disables)")
	store := fs.String("store", defaultSimStore(), "fence store of the simulator (created if missing)")
	id := fs.String("id", "sim", "gateway id, used in topics")
	level := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return err
	}

	brokerURL := *external
	if brokerURL == "" {
		b, err := sim.StartBroker(*listen, log.With("component", "broker"))
		if errors.Is(err, sim.ErrAddrInUse) {
			return fmt.Errorf("%s is already in use (is a Mosquitto running?): start with --mqtt 127.0.0.1:1884 for another port, or --broker tcp://%s to use that broker", *listen, *listen)
		}
		if err != nil {
			return err
		}
		defer b.Close()
		brokerURL = b.URL()
	}

	cfgText := fmt.Sprintf("id: %s\nmqtt: {broker: %q}\nstore: %q\nboard: sim\nhttp: %q\nactuators:\n", *id, brokerURL, *store, *httpAddr)
	for _, a := range simActuators {
		cfgText += fmt.Sprintf("  - {name: %s, pin: %s, boot: %s, scope: %q}\n", a.Name, a.Pin, a.Boot, a.Scope)
	}
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		return errUsage{err}
	}
	return service.Run(ctx, cfg, service.Options{Init: true, Logger: log, Ready: func(info service.Info) {
		fmt.Fprintf(stdout, "fencegate simulator ready\n")
		fmt.Fprintf(stdout, "  broker:    %s%s\n", brokerURL, map[bool]string{true: " (embedded)", false: ""}[*external == ""])
		if info.HTTP != "" {
			fmt.Fprintf(stdout, "  api:       http://%s/api/actuators\n", info.HTTP)
		}
		fmt.Fprintf(stdout, "  store:     %s\n  latch:     %s\n", info.Store, info.Latch)
		fmt.Fprintf(stdout, "  actuators: pump, valve, fan+heater (one scope: climate)\n")
		host, port := brokerHostPort(brokerURL)
		fmt.Fprintf(stdout, "try:\n  mosquitto_sub -h %s -p %s -t '%s/%s/+/result' -v &\n", host, port, cfg.MQTT.TopicPrefix, cfg.ID)
		fmt.Fprintf(stdout, "  mosquitto_pub -h %s -p %s -q 1 -t %s/%s/pump/set -m '{\"id\":\"try-1\",\"token\":42,\"state\":\"on\",\"holder\":\"me\"}'\n", host, port, cfg.MQTT.TopicPrefix, cfg.ID)
		fmt.Fprintf(stdout, "stop with Ctrl-C\n")
	}})
}

func brokerHostPort(u string) (string, string) {
	var host, port string
	rest := u
	if i := len("tcp://"); len(u) > i && u[:i] == "tcp://" {
		rest = u[i:]
	}
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i] == ':' {
			host, port = rest[:i], rest[i+1:]
			break
		}
	}
	if host == "" {
		return rest, "1883"
	}
	return host, port
}
