// Package service assembles a running gateway from a configuration: the
// fence store, the actuator bank and its boot rule, the board's outputs,
// the HTTP API and the MQTT link, started in that order and stopped in
// reverse.
//
// Start-up order matters for safety: the store is opened (never silently
// created), the bank binds the actuators to their scopes and records the
// boot rule's decision, the board takes over each line at the level that
// decision gives, every output is driven there, and only then does the
// gateway subscribe to commands.
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
	"runtime"
	"runtime/metrics"
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
	"github.com/fencegate/fencegate/mqttlink"
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
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkStoreDir(cfg.Store); err != nil {
		return err
	}
	var create *fencelog.Birth
	if opts.Init {
		create = fencelog.Fresh()
	}
	_, statErr := os.Lstat(cfg.Store)
	var flog *fencelog.Store
	var link *mqttlink.Link
	var names []string
	for _, a := range cfg.Actuators {
		names = append(names, a.Name)
	}
	mets := gwmetrics.New(gwmetrics.Sources{
		Actuators: names,
		Store:     func() fencelog.Stats { return flog.Stats() },
		StorePath: cfg.Store,
		Fences:    func() (map[string]fence.Fence, error) { return flog.Fences() },
		Broker: func() gwmetrics.Broker {
			st := link.Status()
			return gwmetrics.Broker{Connected: st.Connected, Subscribed: st.Subscribed, Connects: st.Connects,
				FailedAttempts: st.FailedAttempts, LastError: st.LastError, LastErrorAt: st.LastErrorAt}
		},
		Version: opts.Version,
	})
	flog, err := fencelog.Open(cfg.Store, &fencelog.Options{Create: create, Gateway: cfg.ID, Logger: log.With("component", "fencelog"),
		CommitDelay: opts.CommitDelay, OnCommit: mets.OnCommit})
	if err != nil {
		return err
	}
	if create != nil && errors.Is(statErr, fs.ErrNotExist) {
		log.Warn("created a new fence store as gateway init --new does: floor 0, every token passes until a command raises a fence; "+
			"if a controller may hold a token for this gateway, stop and create the store with gateway init --floor-from-etcd or --floor instead",
			"store", cfg.Store)
	}
	defer flog.Close()
	info := Info{Store: cfg.Store}

	decisions := newDecisionLog(log.With("component", "decisions"), floodInterval)
	observer := mets.Observer()
	counted := observer.Decided
	observer.Decided = func(e actuator.Event) {
		counted(e)
		decisions.decided(e)
	}
	bank, err := actuator.New(flog, cfg.Specs(), &actuator.Options{
		Logger:      log.With("component", "actuator"),
		Interlocks:  cfg.Locks(),
		Rules:       cfg.Rules(),
		Safe:        cfg.SafeRules(),
		Trips:       cfg.Trips(),
		AfterCommit: opts.AfterCommit,
		Changed:     func(o []fence.Output) { link.Changed(o) },
		Authorize:   authorize(cfg, log),
		Observer:    observer,
	})
	if err != nil {
		return err
	}
	log.Info("signed commands", "policy", cfg.Signing())
	topics := wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID}
	sec, err := cfg.MQTT.Security()
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration warning", "component", "config", "warning", w)
	}
	var announce *mqttlink.Announcement
	if ha := cfg.HomeAssistant; ha != nil {
		d, err := hass.New(hass.Options{Prefix: ha.DiscoveryPrefix, Topics: topics, Version: opts.Version, Actuators: names})
		if err != nil {
			return err
		}
		announce = &mqttlink.Announcement{Topic: d.Topic, Payload: d.Payload, BirthTopic: d.BirthTopic, BirthPayload: d.BirthPayload}
		log.Info("Home Assistant discovery", "topic", d.Topic, "birth", d.BirthTopic)
	}
	var readyOnce sync.Once
	st := &status{cfg: cfg, opts: opts, store: flog, bank: bank, started: time.Now().UTC()}
	link = mqttlink.New(mqttlink.Options{
		Broker:    cfg.MQTT.Broker,
		Topics:    topics,
		ClientID:  cfg.MQTT.ClientID,
		Username:  cfg.MQTT.Username,
		Password:  sec.Password,
		TLS:       sec.TLS,
		Settings:  sec.Settings,
		Actuators: bank.Names(),
		Store:     flog.ID(),
		Version:   opts.Version,
		Logger:    log.With("component", "mqttlink"),
		Announce:  announce,
		Lost:      func(err error) { go bank.Disconnected(err) },
		Ready: func() {
			readyOnce.Do(func() {
				log.Info("gateway ready", "id", cfg.ID, "subscribed", topics.SetFilter())
				supervise.Ready(st.readiness().String())
				if opts.Ready != nil {
					opts.Ready(info)
				}
			})
		},
	}, bank)
	st.link = link

	if err := tripAtStart(cfg, bank); err != nil {
		return err
	}
	ins := &inputs{cfg: cfg, log: log.With("component", "inputs"), bank: bank, link: link}
	var started atomic.Bool
	board, err := openBoard(cfg, bank, func(e boards.InputEvent) {
		if started.Load() {
			ins.changed(e)
		}
	})
	if err != nil {
		return err
	}
	defer board.Close()
	if err := bank.AttachInputs(func(name string) (actuator.Input, error) { return inputOf(cfg, board, name) }); err != nil {
		return err
	}
	log.Info("board opened", "board", board.String())
	if cfg.Board == config.BoardSim {
		info.Latch = boards.LatchPath(cfg.Store)
	}
	started.Store(true) // changes from now on (the bank acts on them once Start attached the pins)
	if err := bank.Start(board.Pin); err != nil {
		return err
	}
	defer bank.Stop() // a running pulse ends at rest, before the board is closed
	if err := ins.start(board); err != nil {
		return err
	}
	log.Info("outputs reconciled", "store", cfg.Store, "actuators", len(cfg.Actuators))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if addr := cfg.HTTPAddr(); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("service: http %s: %w (set http: to another address, or \"\" to disable)", addr, err)
		}
		info.HTTP = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", mets.Handler())
		mux.Handle("/", httpapi.New(source{bank, st, ins}, flog, log.With("component", "http")))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
		}()
		log.Info("HTTP API listening", "url", "http://"+info.HTTP+"/api/status")
	}
	if opts.Listening != nil {
		opts.Listening(info)
	}

	if wd := supervise.Watchdog(); wd > 0 {
		for _, g := range cfg.Locks() {
			if g.DeadTime+stallMargin > supervise.StallLimit(wd) {
				log.Warn("WatchdogSec is too short for this interlock's dead time: a command waiting out the dead time (and its commit) may stop the watchdog's pings and have systemd restart the gateway; "+
					"set WatchdogSec to at least twice the dead time plus 10 s", "interlock", g.Name, "dead_time", g.DeadTime.String(), "watchdog", wd.String())
			}
		}
	}
	go decisions.run(ctx)
	go supervise.Run(ctx, supervise.Options{
		Status:  func() string { return st.readiness().String() },
		Stalled: func(limit time.Duration) string { return stalled(flog, bank, limit) },
		Logger:  log.With("component", "supervise"),
	})
	defer supervise.Stopping()

	go func() {
		select {
		case <-flog.Broken():
			log.Error("fence store refused a write; stopping so that the supervisor restarts the gateway", "err", flog.Err())
			cancel()
		case <-ctx.Done():
		}
	}()

	if err := link.Run(ctx); err != nil {
		return err
	}
	if err := flog.Err(); errors.Is(err, fencelog.ErrBroken) {
		return err
	}
	return nil
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

// openBoard opens the configured board with every line at the level the
// bank's boot rule decided.
func openBoard(cfg *config.Config, bank *actuator.Bank, onInput func(boards.InputEvent)) (boards.Board, error) {
	var lines []boards.Line
	for _, l := range bank.Lines() {
		lines = append(lines, boards.Line{Pin: l.Pin, InitialHigh: l.High})
	}
	return boards.Open(boards.Options{Board: cfg.Board, Store: cfg.Store, Lines: lines, Inputs: inputLines(cfg), OnInput: onInput})
}

// tripAtStart reads the trip inputs before the outputs are taken over, on
// a board opened for the inputs alone and closed again, so that a scope
// tripped now has its outputs taken over at its safe state
// (actuator.Bank.TripAtStart).
func tripAtStart(cfg *config.Config, bank *actuator.Bank) error {
	if len(cfg.Trips()) == 0 {
		return nil
	}
	b, err := boards.Open(boards.Options{Board: cfg.Board, Store: cfg.Store, Inputs: inputLines(cfg)})
	if err != nil {
		return err
	}
	defer b.Close()
	return bank.TripAtStart(func(name string) (bool, error) {
		i, err := inputOf(cfg, b, name)
		if err != nil {
			return false, err
		}
		return i.Level()
	})
}

// inputOf returns the board's input that the configuration names name.
func inputOf(cfg *config.Config, b boards.Board, name string) (boards.Input, error) {
	for _, in := range cfg.Inputs {
		if in.Name == name {
			return b.Input(in.Output())
		}
	}
	return nil, fmt.Errorf("no input %q in the configuration", name)
}

// inputLines are the configuration's inputs as boards take them.
func inputLines(cfg *config.Config) []boards.InputLine {
	var out []boards.InputLine
	for _, in := range cfg.Inputs {
		out = append(out, boards.InputLine{Pin: in.Output(), Pull: boards.Pull(in.Pull), Debounce: in.Debounce, Edge: boards.Edge(in.Edge)})
	}
	return out
}

// inputs carries the board's inputs to the bank (trips, and each
// input's recorded change count) and the link (its retained level).
type inputs struct {
	cfg  *config.Config
	log  *slog.Logger
	bank *actuator.Bank
	link *mqttlink.Link

	mu     sync.Mutex
	latest map[string]wire.InputState
}

// Inputs implements httpapi.InputSource: the inputs as last published.
func (ins *inputs) Inputs() []httpapi.Input {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	out := []httpapi.Input{}
	for _, in := range ins.cfg.Inputs {
		s := ins.latest[in.Name]
		pull := in.Pull
		if pull == "" {
			pull = "none"
		}
		out = append(out, httpapi.Input{Name: in.Name, Pin: in.Output(), Pull: pull, Level: s.Level, Seq: s.Seq, ChangedAt: s.ChangedAt})
	}
	return out
}

// changed handles a change the board reported (in order per input).
func (ins *inputs) changed(e boards.InputEvent) {
	name := ins.cfg.Inputs[e.Input].Name
	ins.log.Info("input changed", "input", name, "level", levelWord(e.High))
	ins.publish(name, e.High)
}

// publish tells the bank the input's level, which records it, and
// publishes it.
func (ins *inputs) publish(name string, high bool) {
	rec, err := ins.bank.InputChanged(name, high)
	if err != nil {
		ins.log.Error("record input", "input", name, "err", err)
		return
	}
	st := wire.InputState{Input: name, Level: levelWord(high), Seq: rec.Seq, ChangedAt: rec.ChangedAt}
	ins.mu.Lock()
	if ins.latest == nil {
		ins.latest = map[string]wire.InputState{}
	}
	ins.latest[name] = st
	ins.mu.Unlock()
	ins.link.InputChanged(st)
}

// start publishes every input's level as it is now.
func (ins *inputs) start(board boards.Board) error {
	for _, in := range ins.cfg.Inputs {
		i, err := board.Input(in.Output())
		if err != nil {
			return err
		}
		high, err := i.Level()
		if err != nil {
			return fmt.Errorf("service: input %s: %w", in.Name, err)
		}
		ins.publish(in.Name, high)
	}
	return nil
}

func levelWord(high bool) string {
	if high {
		return "high"
	}
	return "low"
}

// source is what the HTTP API reads: the bank, and the gateway's status.
type source struct {
	*actuator.Bank
	*status
	*inputs
}

// status answers GET /api/status.
type status struct {
	cfg     *config.Config
	opts    Options
	store   *fencelog.Store
	link    *mqttlink.Link
	bank    *actuator.Bank
	started time.Time
}

// stallMargin is what a command's own work (its commit, its drives) may
// add to an interlock's dead time before the watchdog takes its scope for
// stuck.
const stallMargin = 5 * time.Second

// readiness judges the gateway's status (GET /readyz).
func (s *status) readiness() httpapi.Readiness { return httpapi.ReadinessOf(s.Status()) }

// stalled says why the decision path has stood still for longer than
// limit: a store commit, or a scope held without progress; "" if neither.
func stalled(flog *fencelog.Store, bank *actuator.Bank, limit time.Duration) string {
	if d := flog.CommitRunning(); d > limit {
		return fmt.Sprintf("a commit of the fence store has run for %v", d.Round(time.Millisecond))
	}
	if sc, d := bank.Stalled(limit); sc != "" {
		return fmt.Sprintf("scope %s has been held for %v without progress", sc, d.Round(time.Millisecond))
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Status implements httpapi.Source.
func (s *status) Status() httpapi.Status {
	return httpapi.Status{
		GatewayID:     s.cfg.ID,
		Version:       s.opts.Version,
		Started:       s.started,
		Board:         s.cfg.Board,
		Store:         s.cfg.Store,
		StoreID:       s.store.ID(),
		StoreFloor:    s.store.Birth().Floor,
		StoreFloorWhy: s.store.Birth().Why,
		StoreCommits:  s.store.Stats(),
		StoreError:    errText(s.store.Err()),
		Reconciled:    s.bank.Started(),
		Broker:        broker(s.link.Status()),
		Topics:        wire.Topics{Prefix: s.cfg.MQTT.TopicPrefix, GatewayID: s.cfg.ID}.SetFilter(),
		Runtime:       readRuntime(),
	}
}

// runtimeMetrics are the runtime/metrics samples of httpapi.Runtime, in
// its fields' order.
var runtimeMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

// readRuntime reads the process's goroutines and heap without stopping the
// world (runtime.ReadMemStats would). A metric this Go release lacks reads
// as 0.
func readRuntime() httpapi.Runtime {
	samples := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	u := func(s metrics.Sample) uint64 {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.Value.Uint64()
	}
	return httpapi.Runtime{Goroutines: runtime.NumGoroutine(), HeapBytes: u(samples[0]), HeapLiveBytes: u(samples[1])}
}

func broker(m mqttlink.Status) httpapi.Broker {
	return httpapi.Broker{URL: m.Broker, ClientID: m.ClientID, Connected: m.Connected, Since: m.Since, Subscribed: m.Subscribed,
		LastError: m.LastError, LastErrorAt: m.LastErrorAt, Failures: m.Failures, Conflict: m.Conflict}
}
