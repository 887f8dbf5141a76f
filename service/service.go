// Package service assembles a running gateway from a configuration: the
// fence store, the actuator bank and its boot rule, the board's outputs,
// the HTTP API and the MQTT link, started in that order and stopped in
// reverse.
//
// Start-up order matters for safety: the store is opened (never silently
// created), the bank binds the actuators to their scopes and records the
// boot rule's decision, the trip inputs are read before any output is
// taken over, the board takes over each line at the level that decision
// gives, every output is driven there, the API listens, and only then
// does the gateway subscribe to commands. Run reads as that list.
//
// [Check] runs the same start-up steps without taking anything over, for
// `gateway check`, so that a check says "ok" exactly when Run would start.
package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/hass"
	"github.com/fencegate/fencegate/httpapi"
	gwmetrics "github.com/fencegate/fencegate/metrics"
	"github.com/fencegate/fencegate/modbusio"
	"github.com/fencegate/fencegate/mqttlink"
	"github.com/fencegate/fencegate/pwmio"
	"github.com/fencegate/fencegate/supervise"
	"github.com/fencegate/fencegate/wire"
)

// Options configure Run.
type Options struct {
	// Init creates the store if it is missing, as for a gateway for which
	// no controller ever held a token (floor 0; gateway init --new).
	Init bool
	// Version is the gateway's version, for the API and the instance claim.
	Version string
	// Logger receives the gateway's log. Nil discards.
	Logger *slog.Logger
	// Listening, if set, is called once outputs are reconciled and the API
	// listens, before the broker is reached.
	Listening func(Info)
	// Ready, if set, is called once outputs are reconciled, the API listens
	// and the command subscription is in place (on the first connection).
	Ready func(Info)
	// AfterCommit is passed to the actuator bank (crash tests only).
	AfterCommit func(fence.Command)
	// CommitDelay slows every commit of the store by this much, as a
	// slower disk's sync would (fencelog.Options.CommitDelay): for
	// benchmarks of SD-card-like storage only (gateway bench --profile
	// sdcard, in builds with the failpoints tag). Zero in normal use.
	CommitDelay time.Duration
}

// Info describes a started gateway.
type Info struct {
	Store string
	Latch string // the sim board's latch file; "" on other boards
	HTTP  string // the JSON API's address; "" if disabled
}

// ErrConflict is returned by Run when another process serves the same
// gateway id (see mqttlink.ErrConflict): a configuration error, which a
// restart cannot fix.
var ErrConflict = mqttlink.ErrConflict

// Run runs the gateway until ctx is done. It returns an error if start-up
// fails or the store breaks (a failed write), so that a supervisor restarts
// the process and the store is read afresh.
//
// Start-up is a sequence of phases of one gateway, each using only what
// the phases before it set; what they started stops in reverse order.
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	g := newGateway(cfg, opts)
	defer g.stop()
	for _, phase := range []func() error{
		g.openStore,     // opened, never silently created
		g.bindBank,      // the boot rule decides each output's state
		g.prepareLink,   // the MQTT link, which connects only in serve
		g.openInputs,    // the board's inputs; no output is taken over yet
		g.tripAtStart,   // a tripped scope is taken over at its safe state
		g.takeOverBoard, // each line at the level the boot rule decided
		g.openModbus,    // the outputs on Modbus buses, reached when driven
		g.openPWM,       // the PWM channels, exported, at their frequency
		g.driveOutputs,  // every output driven there
		g.startHTTP,     // the API listens
	} {
		if err := phase(); err != nil {
			return err
		}
	}
	return g.serve(ctx) // only now subscribe to commands
}

// gateway is a gateway being started, run and stopped. Its fields are set
// by newGateway and by the phases, in Run's order.
type gateway struct {
	cfg    *config.Config
	opts   Options
	log    *slog.Logger
	topics wire.Topics
	info   Info // completed by the phases; Ready and Listening get it

	// Set by newGateway: the fan-out and the listeners that need nothing
	// else, so that they follow the gateway from its first commit.
	events    events
	metrics   *gwmetrics.Metrics
	decisions *decisionLog

	store     *fencelog.Store             // openStore
	bank      *actuator.Bank              // bindBank
	link      *mqttlink.Link              // prepareLink
	status    *status                     // prepareLink
	inputs    *inputs                     // openInputs
	opening   boards.Opening              // openInputs
	board     boards.Board                // takeOverBoard
	modbus    map[string]*modbusio.Output // openModbus: the Modbus outputs, by canonical name
	pwm       map[string]*pwmio.Channel   // openPWM: the PWM channels, by canonical name
	started   atomic.Bool                 // driveOutputs: the board's input changes count from then on
	readyOnce sync.Once

	stops []func() // what the phases started, for stop
}

func newGateway(cfg *config.Config, opts Options) *gateway {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &gateway{cfg: cfg, opts: opts, log: log, topics: wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID},
		info: Info{Store: cfg.Store}}
	var names []string
	for _, a := range cfg.Actuators {
		names = append(names, a.Name)
	}
	g.metrics = gwmetrics.New(names)
	g.decisions = newDecisionLog(log.With("component", "decisions"), floodInterval)
	g.events.committed = append(g.events.committed, g.metrics.OnCommit)
	g.events.observe(g.metrics.Observer())
	g.events.decided = append(g.events.decided, g.decisions.decided, g.events.stream)
	return g
}

// stop stops what the phases started, in reverse order.
func (g *gateway) stop() {
	for i := len(g.stops) - 1; i >= 0; i-- {
		g.stops[i]()
	}
}

// openStore opens the fence store. It creates a missing one only for
// Options.Init (gateway run --init), never silently.
func (g *gateway) openStore() error {
	if err := checkStoreDir(g.cfg.Store); err != nil {
		return err
	}
	var create *fencelog.Birth
	if g.opts.Init {
		create = fencelog.Fresh()
	}
	_, statErr := os.Lstat(g.cfg.Store)
	store, err := fencelog.Open(g.cfg.Store, &fencelog.Options{Create: create, Gateway: g.cfg.ID, Logger: g.log.With("component", "fencelog"),
		CommitDelay: g.opts.CommitDelay, OnCommit: g.events.commit})
	if err != nil {
		return err
	}
	g.store = store
	g.stops = append(g.stops, func() { store.Close() })
	if create != nil && errors.Is(statErr, fs.ErrNotExist) {
		g.log.Warn("created a new fence store as gateway init --new does: floor 0, every token passes until a command raises a fence; "+
			"if a controller may hold a token for this gateway, stop and create the store with gateway init --floor-from-etcd or --floor instead",
			"store", g.cfg.Store)
	}
	return nil
}

// bindBank binds every actuator to its scope in the store and records the
// boot rule's decision; the bank's decisions and state changes feed the
// gateway's events, and a lost broker its dead-man.
func (g *gateway) bindBank() error {
	bank, err := actuator.New(g.store, g.cfg.Specs(), &actuator.Options{
		Logger:      g.log.With("component", "actuator"),
		Interlocks:  g.cfg.Locks(),
		Rules:       g.cfg.Rules(),
		Safe:        g.cfg.SafeRules(),
		Trips:       g.cfg.Trips(),
		AfterCommit: g.opts.AfterCommit,
		Changed:     g.events.change,
		Authorize:   authorize(g.cfg, g.log),
		Observer:    g.events.observer(),
	})
	if err != nil {
		return err
	}
	g.bank = bank
	// Lost must not block: the dead-man runs in a goroutine of its own.
	g.events.lost = append(g.events.lost, func(err error) { go bank.Disconnected(err) })
	g.log.Info("signed commands", "policy", g.cfg.Signing())
	return nil
}

// prepareLink makes the MQTT link, which publishes the bank's states and
// the inputs' levels, retained, once it connects (in serve).
func (g *gateway) prepareLink() error {
	sec, err := g.cfg.MQTT.Security()
	if err != nil {
		return err
	}
	for _, w := range g.cfg.Warnings() {
		g.log.Warn("configuration warning", "component", "config", "warning", w)
	}
	announce, err := g.announcement()
	if err != nil {
		return err
	}
	g.link = mqttlink.New(mqttlink.Options{
		Broker:    g.cfg.MQTT.Broker,
		Topics:    g.topics,
		ClientID:  g.cfg.MQTT.ClientID,
		Username:  g.cfg.MQTT.Username,
		Password:  sec.Password,
		TLS:       sec.TLS,
		Settings:  sec.Settings,
		Actuators: g.bank.Names(),
		Store:     g.store.ID(),
		Version:   g.opts.Version,
		Logger:    g.log.With("component", "mqttlink"),
		Announce:  announce,
		Lost:      g.events.lose,
		Ready:     g.ready,
	}, g.bank)
	g.events.changed = append(g.events.changed, g.link.Changed)
	g.events.inputs = append(g.events.inputs, g.link.InputChanged)
	g.status = &status{cfg: g.cfg, opts: g.opts, store: g.store, bank: g.bank, link: g.link, started: time.Now().UTC()}
	return nil
}

// announcement is the Home Assistant discovery the link publishes, if
// configured; nil if not.
func (g *gateway) announcement() (*mqttlink.Announcement, error) {
	ha := g.cfg.HomeAssistant
	if ha == nil {
		return nil, nil
	}
	setpoints := map[string]bool{}
	for _, a := range g.cfg.Actuators {
		setpoints[a.Name] = a.IsSetpoint()
	}
	d, err := hass.New(hass.Options{Prefix: ha.DiscoveryPrefix, Topics: g.topics, Version: g.opts.Version, Actuators: g.bank.Names(), Setpoints: setpoints})
	if err != nil {
		return nil, err
	}
	g.log.Info("Home Assistant discovery", "topic", d.Topic, "birth", d.BirthTopic)
	return &mqttlink.Announcement{Topic: d.Topic, Payload: d.Payload, BirthTopic: d.BirthTopic, BirthPayload: d.BirthPayload}, nil
}

// ready tells the log, the supervisor and Options.Ready, once, that the
// gateway takes commands (the link calls it on each connection).
func (g *gateway) ready() {
	g.readyOnce.Do(func() {
		g.log.Info("gateway ready", "id", g.cfg.ID, "subscribed", g.topics.SetFilter())
		supervise.Ready(g.status.readiness().String())
		if g.opts.Ready != nil {
			g.opts.Ready(g.info)
		}
	})
}

// openInputs opens the board's inputs, and finds its outputs without
// taking any over.
func (g *gateway) openInputs() error {
	g.inputs = &inputs{cfg: g.cfg, log: g.log.With("component", "inputs"), bank: g.bank, events: &g.events}
	op, err := boards.OpenInputs(boards.Options{Board: g.cfg.Board, Store: g.cfg.Store, Lines: outputLines(g.cfg), Inputs: inputLines(g.cfg),
		OnInput: g.inputChanged})
	if err != nil {
		return err
	}
	g.opening = op
	g.stops = append(g.stops, func() { op.Close() })
	return nil
}

// inputChanged takes the board's input changes once the outputs are
// driven (driveOutputs); before, Start reads the trip inputs itself, and
// every input's level is published as it is then.
func (g *gateway) inputChanged(e boards.InputEvent) {
	if g.started.Load() {
		g.inputs.changed(e)
	}
}

// tripAtStart reads the trip inputs before the outputs are taken over, so
// that a scope tripped now has its outputs taken over at its safe state
// (actuator.Bank.TripAtStart).
func (g *gateway) tripAtStart() error {
	return g.bank.TripAtStart(func(name string) (bool, error) {
		i, err := inputOf(g.cfg, g.opening, name)
		if err != nil {
			return false, err
		}
		return i.Level()
	})
}

// takeOverBoard takes over every output line at the level the bank's boot
// rule decided, and gives the bank the inputs its rules read.
func (g *gateway) takeOverBoard() error {
	var lines []boards.Line
	for _, l := range g.bank.Lines() {
		if onBoard(g.cfg, l.Actuator) {
			lines = append(lines, boards.Line{Pin: l.Pin, InitialHigh: l.High})
		}
	}
	board, err := g.opening.TakeOver(lines)
	if err != nil {
		return err
	}
	g.board = board
	if err := g.bank.AttachInputs(func(name string) (actuator.Input, error) { return inputOf(g.cfg, board, name) }); err != nil {
		return err
	}
	g.log.Info("board opened", "board", board.String())
	if g.cfg.Board == config.BoardSim {
		g.info.Latch = boards.LatchPath(g.cfg.Store)
	}
	return nil
}

// driveOutputs drives every output as the boot rule decided, and publishes
// every input's level.
func (g *gateway) driveOutputs() error {
	g.started.Store(true) // changes from now on (the bank acts on them once Start attached the pins)
	if err := g.bank.AttachSetpoints(g.setpoint); err != nil {
		return err
	}
	if err := g.bank.Start(g.pin); err != nil {
		return err
	}
	g.stops = append(g.stops, g.bank.Stop) // a running pulse ends at rest, before the board is closed
	if err := g.inputs.start(g.board); err != nil {
		return err
	}
	g.log.Info("outputs reconciled", "store", g.cfg.Store, "actuators", len(g.cfg.Actuators))
	return nil
}

// startHTTP serves the JSON API, the dashboard and the metrics, unless
// the configuration disables it.
func (g *gateway) startHTTP() error {
	g.metrics.Read(gwmetrics.Sources{Store: g.store.Stats, StorePath: g.cfg.Store, Fences: g.store.Fences,
		Broker: func() gwmetrics.Broker { return brokerMetrics(g.link.Status()) }, Watched: g.bank.Healths, Duties: g.duties, Version: g.opts.Version})
	if addr := g.cfg.HTTPAddr(); addr != "" {
		ln, err := listenHTTP(addr)
		if err != nil {
			return fmt.Errorf("service: http %s: %w", addr, err)
		}
		g.info.HTTP = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", g.metrics.Handler())
		mux.Handle("/", httpapi.New(source{g.bank, g.status, g.inputs, &g.events}, g.store, g.log.With("component", "http")))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		g.stops = append(g.stops, func() {
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
		})
		g.log.Info("HTTP API listening", "url", "http://"+g.info.HTTP+"/api/status")
	}
	if g.opts.Listening != nil {
		g.opts.Listening(g.info)
	}
	return nil
}

// listenHTTP listens on the API's address (Run and Check).
func listenHTTP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w (is a gateway already running? set http: to another address, or \"\" to disable)", err)
	}
	return ln, nil
}

// serve connects to the broker and takes commands until ctx is done or
// the store refuses a write.
func (g *gateway) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.warnWatchdog()
	go g.decisions.run(ctx)
	go supervise.Run(ctx, supervise.Options{
		Status:  func() string { return g.status.readiness().String() },
		Stalled: func(limit time.Duration) string { return stalled(g.store, g.bank, limit) },
		Logger:  g.log.With("component", "supervise"),
	})
	defer supervise.Stopping()

	go func() {
		select {
		case <-g.store.Broken():
			g.log.Error("fence store refused a write; stopping so that the supervisor restarts the gateway", "err", g.store.Err())
			cancel()
		case <-ctx.Done():
		}
	}()

	if err := g.link.Run(ctx); err != nil {
		return err
	}
	if err := g.store.Err(); errors.Is(err, fencelog.ErrBroken) {
		return err
	}
	return nil
}

// warnWatchdog warns of a systemd watchdog too short for an interlock's
// dead time.
func (g *gateway) warnWatchdog() {
	wd := supervise.Watchdog()
	if wd <= 0 {
		return
	}
	for _, l := range g.cfg.Locks() {
		if l.DeadTime+stallMargin > supervise.StallLimit(wd) {
			g.log.Warn("WatchdogSec is too short for this interlock's dead time: a command waiting out the dead time (and its commit) may stop the watchdog's pings and have systemd restart the gateway; "+
				"set WatchdogSec to at least twice the dead time plus 10 s", "interlock", l.Name, "dead_time", l.DeadTime.String(), "watchdog", wd.String())
		}
	}
}

// authorize is the bank's check of signed commands: the configuration's
// policy, and a warning in the log for each command it refuses (who
// signed it, never the signature).
func authorize(cfg *config.Config, log *slog.Logger) func(fence.Command, string) (string, error) {
	p := cfg.SignPolicy()
	return func(c fence.Command, scope string) (string, error) {
		reason, err := p.Authorize(c, scope)
		if err != nil {
			log.Warn("command refused", "actuator", c.Actuator, "id", c.ID, "token", c.Fence.Token, "signer", c.Signer, "reason", reason, "err", err)
		}
		return reason, err
	}
}
