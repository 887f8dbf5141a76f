package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/service"
)

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage{err}
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, usageErr("--config is required")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, errUsage{err}
	}
	return cfg, nil
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	initStore := fs.Bool("init", false, "create the fence store if it is missing")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	crashFile := fs.String("sim-crash-file", "", "sim board only (used by the simulator's crash scenario): after a durable commit, if this file exists, remove it and die by SIGKILL before driving")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return err
	}
	afterCommit := failpoint()
	if *crashFile != "" {
		if cfg.Board != config.BoardSim {
			return usageErr("--sim-crash-file works only with board: sim")
		}
		afterCommit = simCrash(*crashFile)
	}
	err = service.Run(ctx, cfg, service.Options{Init: *initStore, Logger: log, AfterCommit: afterCommit})
	if errors.Is(err, fencelog.ErrNotExist) || errors.Is(err, fencelog.ErrNotStore) {
		return errUsage{err}
	}
	return err
}

// configCommand parses the flags of a subcommand that takes only --config,
// and loads and checks that configuration.
func configCommand(name string, args []string, stderr io.Writer) (*config.Config, string, error) {
	fs := newFlags(name, stderr)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return nil, "", err
	}
	cfg, err := loadConfig(*cfgPath)
	return cfg, *cfgPath, err
}

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	cfg, path, err := configCommand("check", args, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok: gateway %q, %d actuators, store %s\n", path, cfg.ID, len(cfg.Actuators), cfg.Store)
	return nil
}

func cmdInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", stderr)
	store := fs.String("store", "", "fence store file")
	n := fs.Int("audit", 20, "number of audit entries to print")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *store == "" {
		return usageErr("--store is required")
	}
	l, err := fencelog.Open(*store, &fencelog.Options{AuditFlush: -1})
	if err != nil {
		return err
	}
	defer l.Close()
	fences, err := l.Fences()
	if err != nil {
		return err
	}
	scopes := make([]string, 0, len(fences))
	for s := range fences {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	audit, err := l.Audit(*n)
	if err != nil {
		return err
	}
	type scope struct {
		Scope string `json:"scope"`
		Token uint64 `json:"token"`
		Seq   uint64 `json:"seq"`
	}
	out := struct {
		Fences []scope          `json:"fences"`
		Audit  []fencelog.Entry `json:"audit"`
	}{Audit: audit}
	for _, s := range scopes {
		out.Fences = append(out.Fences, scope{s, fences[s].Token, fences[s].Seq})
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// simCrash is the simulator's crash point between the fsync and the drive:
// armed by creating file, it fires once.
func simCrash(file string) func(fence.Command) {
	return func(fence.Command) {
		if os.Remove(file) == nil {
			killSelf() // never drives
		}
	}
}

// cmdInit creates the fence store of a configuration, once. It fails on an
// existing store in any form, so that it can never serve as an idempotent
// step that recreates a lost store. It touches no GPIO, MQTT or HTTP.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	cfg, _, err := configCommand("init", args, stderr)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(cfg.Store); err == nil {
		return fmt.Errorf("store %s already exists; init never touches an existing store", cfg.Store)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store %s: %w", cfg.Store, err)
	}
	l, err := fencelog.Open(cfg.Store, &fencelog.Options{Create: true, AuditFlush: -1})
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created store %s\n", cfg.Store)
	return nil
}
