// Package service assembles a running gateway from a configuration: the
// fence store, the board's outputs, the actuator bank, the JSON API and the
// MQTT link, started in that order and stopped in reverse.
//
// Start-up order matters for safety: the store is opened (never silently
// created), every output is reconciled to its recorded or boot state, and
// only then does the gateway subscribe to commands.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/mqttlink"
	"github.com/fencegate/fencegate/wire"
)

// Options configure Run.
type Options struct {
	// Init creates the store if it is missing.
	Init bool
	// Logger receives the gateway's log. Nil discards.
	Logger *slog.Logger
	// Ready, if set, is called once outputs are reconciled, the API listens
	// and the command subscription is in place.
	Ready func(Info)
	// AfterCommit is passed to the actuator bank (crash tests only).
	AfterCommit func(fence.Command)
}

// Info describes a started gateway.
type Info struct {
	Store string
	Latch string // the sim board's latch file; "" on other boards
	HTTP  string // the JSON API's address; "" if disabled
}

// initialLevels returns each output's level at start: the level its boot
// policy will reconcile it to (the recorded state for boot: last), so that
// taking over the line moves nothing.
func initialLevels(flog *fencelog.Log, cfg *config.Config) ([]boards.Line, error) {
	outs := make([]boards.Line, 0, len(cfg.Actuators))
	for _, a := range cfg.Actuators {
		on := a.Boot == "on"
		if a.Boot == "last" {
			rec, err := flog.Output(a.Scope, a.Name)
			if err != nil {
				return nil, err
			}
			on = rec.State == fence.StateOn
		}
		outs = append(outs, boards.Line{Pin: a.Pin, InitialHigh: on != a.ActiveLow})
	}
	return outs, nil
}

// Run runs the gateway until ctx is done. It returns an error if start-up
// fails or the store breaks (a failed write), so that a supervisor restarts
// the process and the store is read afresh.
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	flog, err := fencelog.Open(cfg.Store, &fencelog.Options{Create: opts.Init, Logger: log.With("component", "fencelog")})
	if err != nil {
		return err
	}
	defer flog.Close()
	info := Info{Store: cfg.Store}

	lines, err := initialLevels(flog, cfg)
	if err != nil {
		return err
	}
	board, err := boards.Open(boards.Options{Board: cfg.Board, Store: cfg.Store, Lines: lines})
	if err != nil {
		return err
	}
	defer board.Close()
	log.Info("board opened", "board", board.String())
	if cfg.Board == config.BoardSim {
		info.Latch = boards.LatchPath(cfg.Store)
	}
	pinOf := board.Pin

	specs := make([]actuator.Spec, 0, len(cfg.Actuators))
	names := make([]string, 0, len(cfg.Actuators))
	for _, a := range cfg.Actuators {
		pin, err := pinOf(a.Pin)
		if err != nil {
			return fmt.Errorf("service: actuator %s: %w", a.Name, err)
		}
		specs = append(specs, actuator.Spec{Name: a.Name, Scope: a.Scope, PinName: a.Pin,
			ActiveLow: a.ActiveLow, Boot: actuator.Boot(a.Boot), Pin: pin})
		names = append(names, a.Name)
	}
	bank, err := actuator.New(flog, specs, &actuator.Options{
		Logger: log.With("component", "actuator"), AfterCommit: opts.AfterCommit})
	if err != nil {
		return err
	}
	if err := bank.Reconcile(); err != nil {
		return err
	}
	log.Info("outputs reconciled", "store", cfg.Store, "actuators", len(names))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if addr := cfg.HTTPAddr(); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("service: http %s: %w (set http: to another address, or \"\" to disable)", addr, err)
		}
		info.HTTP = ln.Addr().String()
		srv := &http.Server{Handler: httpapi.New(bank, log.With("component", "http")), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			srv.Shutdown(sctx)
		}()
		log.Info("JSON API listening", "url", "http://"+info.HTTP+"/api/actuators")
	}

	go func() {
		select {
		case <-flog.Broken():
			log.Error("fence store refused a write; stopping so that the supervisor restarts the gateway", "err", flog.Err())
			cancel()
		case <-ctx.Done():
		}
	}()

	err = mqttlink.Run(ctx, mqttlink.Options{
		Broker:    cfg.MQTT.Broker,
		Topics:    wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID},
		ClientID:  cfg.MQTT.ClientID,
		Username:  cfg.MQTT.Username,
		Password:  cfg.MQTT.Password,
		Actuators: names,
		Logger:    log.With("component", "mqttlink"),
		Ready: func() {
			log.Info("gateway ready", "id", cfg.ID, "subscribed", wire.Topics{Prefix: cfg.MQTT.TopicPrefix, GatewayID: cfg.ID}.SetFilter())
			if opts.Ready != nil {
				opts.Ready(info)
			}
		},
	}, bank)
	if err != nil {
		return err
	}
	if err := flog.Err(); errors.Is(err, fencelog.ErrBroken) {
		return err
	}
	return nil
}
