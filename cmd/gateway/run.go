package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/bench"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/service"
)

// loadConfig loads and checks the configuration file at path; its errors
// are configuration errors (exit 78).
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, usageErr("--config is required")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, configErr(err)
	}
	return cfg, nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "--config FILE [--init] [--log-level LEVEL]", `
Runs the gateway: opens the fence store (never creating it unless --init is
given), takes over the outputs at their recorded or boot states, and takes
fenced commands from the broker until SIGINT or SIGTERM.`)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	initStore := fs.Bool("init", false, "create the fence store if it is missing, as gateway init --new does: every token passes (for the simulator and tests; never in a supervisor's command line)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error (debug adds every duplicate command)")
	format := fs.String("log-format", "text", "log format: text (key=value) or json (one object a line)")
	crashFile := fs.String("sim-crash-file", "", "sim board only: after a durable commit, if this file exists, remove it and die before driving")
	fs.hide("sim-crash-file") // the simulator's crash scenario
	announce := fs.Bool("announce", false, "print \""+bench.AnnouncePrefix+"ADDR\" on stdout once the API listens (its address, also when the configuration says port 0)")
	fs.hide("announce") // for gateway bench, which runs the gateway with http port 0
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	delay, err := commitDelay()
	if err != nil {
		return usageErr("%w", err)
	}
	stopProfile, err := startProfiles()
	if err != nil {
		return usageErr("%w", err)
	}
	defer stopProfile()
	softMemoryLimit()
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return err
	}
	if delay > 0 {
		log.Warn("every commit of the fence store is slowed, as on a slower disk (a failpoints build, for gateway bench --profile sdcard)", "commit_delay", delay)
	}
	var listening func(service.Info)
	if *announce {
		listening = func(info service.Info) { fmt.Fprintf(stdout, "%s%s\n", bench.AnnouncePrefix, info.HTTP) }
	}
	afterCommit := failpoint()
	if *crashFile != "" {
		if cfg.Board != config.BoardSim {
			return usageErr("--sim-crash-file works only with board: sim")
		}
		afterCommit = simCrash(*crashFile)
	}
	if *initStore {
		if err := checkBeforeCreate(ctx, cfg); err != nil {
			return err
		}
	}
	err = service.Run(ctx, cfg, service.Options{Init: *initStore, Version: versionNumber(), Logger: log, AfterCommit: afterCommit,
		CommitDelay: delay, Listening: listening})
	if errors.Is(err, fencelog.ErrNotExist) {
		return fmt.Errorf("%w\n%s", err, initHint(*cfgPath))
	}
	return err
}

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "--config FILE [--config-only] [--init] [--broker]", `
Checks a configuration and everything gateway run would start with: the
store (opened read-only), its directory, the board and its lines, the HTTP
address. It says "ok" exactly when run would start, and otherwise exits as
run would (78 for a bad configuration or store, 1 for the rest).`)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	only := fs.Bool("config-only", false, "check the file alone: not the files it names (password, TLS), the store, board or ports (e.g. on another machine than the gateway's)")
	initStore := fs.Bool("init", false, "check as run --init would (a missing store would be created)")
	broker := fs.Bool("broker", false, "also connect to the broker with the gateway's credentials (a failure is a warning: run keeps trying)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	cfg, err := loadForCheck(*cfgPath, *only)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "config %s: ok: gateway %q, %d actuators, %d interlocks, store %s\n", *cfgPath, cfg.ID, len(cfg.Actuators), len(cfg.Interlocks), cfg.Store)
	if len(cfg.Controllers) > 0 {
		fmt.Fprintf(stdout, "signed commands: %s\n", cfg.Signing())
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "config: warning: %s\n", w)
	}
	if *only {
		for _, f := range namedFiles(cfg) {
			fmt.Fprintf(stdout, "config: not read (--config-only): %s\n", f)
		}
		return nil
	}
	findings := service.Check(ctx, cfg, service.CheckOptions{Init: *initStore, Broker: *broker})
	for _, f := range findings {
		switch {
		case f.Err != nil:
			fmt.Fprintf(stdout, "%s: FAIL: %s: %v\n", f.Step, f.Text, f.Err)
		case f.Warning:
			fmt.Fprintf(stdout, "%s: warning: %s\n", f.Step, f.Text)
		default:
			fmt.Fprintf(stdout, "%s: ok: %s\n", f.Step, f.Text)
		}
	}
	failed := worstFinding(findings)
	if failed != nil && errors.Is(failed.Err, fencelog.ErrNotExist) {
		fmt.Fprintln(stdout, initHint(*cfgPath))
	}
	if failed != nil {
		code := exitFailure
		if isConfigError(failed.Err) {
			code = exitConfig
		}
		return &exitError{code, errors.New("gateway run would fail; see above")}
	}
	fmt.Fprintln(stdout, "ok: gateway run would start")
	return nil
}

// worstFinding is the finding of service.Check that decides how run would
// fail: the first configuration error (exit 78), else the first failure;
// nil if run would start.
func worstFinding(findings []service.Finding) *service.Finding {
	var worst *service.Finding
	for i, f := range findings {
		if f.Err != nil && (worst == nil || isConfigError(f.Err) && !isConfigError(worst.Err)) {
			worst = &findings[i]
		}
	}
	return worst
}

// checkBeforeCreate checks, before run --init creates a missing store,
// everything run opens after it (the board, the Modbus buses, the HTTP
// address), as gateway check --init does: a start that fails there would
// leave a new store behind, and the next start would take it for the one
// that was there.
func checkBeforeCreate(ctx context.Context, cfg *config.Config) error {
	if _, err := os.Lstat(cfg.Store); !errors.Is(err, os.ErrNotExist) {
		return nil // nothing to create: run opens it, or says why it cannot
	}
	if f := worstFinding(service.Check(ctx, cfg, service.CheckOptions{Init: true})); f != nil {
		return fmt.Errorf("%s %s: %w; the store %s was not created", f.Step, f.Text, f.Err, cfg.Store)
	}
	return nil
}

func cmdInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "--store FILE [--audit N]", `
Prints every scope's fence and the newest audit entries of a fence store,
as JSON. It opens the store read-only and changes nothing; while a gateway
runs, the store is locked: stop the gateway first, or read its API.`)
	store := fs.String("store", "", "fence store file")
	n := fs.Int("audit", 20, "number of audit entries to print (0 to 10000)")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	if *store == "" {
		return usageErr("--store is required")
	}
	if *n < 0 || *n > 10000 {
		return usageErr("--audit %d: want a number from 0 to 10000", *n)
	}
	l, err := fencelog.Open(*store, &fencelog.Options{ReadOnly: true})
	if err != nil {
		return heldStore(err, *store)
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
	birth := l.Birth()
	out := struct {
		Store    string           `json:"store"`
		ID       string           `json:"id"`
		Gateway  string           `json:"gateway,omitempty"`
		Floor    uint64           `json:"floor"`
		FloorWhy string           `json:"floor_why,omitempty"`
		Created  *time.Time       `json:"created,omitempty"`
		Fences   []scope          `json:"fences"`
		Audit    []fencelog.Entry `json:"audit"`
	}{Store: *store, ID: l.ID(), Gateway: l.Gateway(), Floor: birth.Floor, FloorWhy: birth.Why, Fences: []scope{}, Audit: audit}
	if !birth.At.IsZero() {
		out.Created = &birth.At
	}
	if out.Audit == nil {
		out.Audit = []fencelog.Entry{}
	}
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

// cmdInit creates the fence store of a configuration, once, with the floor
// its administrator decided. It fails on an existing store in any form, so
// that it can never serve as an idempotent step that recreates a lost
// store. It touches no GPIO, MQTT or HTTP (only etcd, with
// --floor-from-etcd).
func cmdInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("init", "--config FILE (--floor N | --floor-from-etcd URL | --new)", `
Creates the fence store named in the configuration, once. Creating a store
is a decision about which tokens are already spent; give exactly one of:

  --floor N               every token up to N is stale
  --floor-from-etcd URL   the floor is etcd's current revision: every token
                          it ever issued is stale. Right after a store was
                          lost (SD card replaced) when tokens come from etcd
  --new                   no controller ever held a token for this gateway
                          (run --init means the same)

It fails if the store exists in any form (even an empty file), and touches
no GPIO, MQTT or network (except etcd with --floor-from-etcd).`)
	cfgPath := fs.String("config", "", "configuration file (YAML)")
	floor := fs.String("floor", "", "every token at or below `N` is stale (0 to 2^63-1)")
	fromEtcd := fs.String("floor-from-etcd", "", "the floor is the current revision of the etcd at `URL` (comma-separated endpoints)")
	fresh := fs.Bool("new", false, "no controller ever held a token for this gateway: floor 0")
	if err := fs.parseNoArgs(args, stdout, stderr); err != nil {
		return err
	}
	if n := countSet(*floor != "", *fromEtcd != "", *fresh); n != 1 {
		return usageErr("give exactly one of --floor N, --floor-from-etcd URL or --new (see gateway init -h): " +
			"a store is born knowing which tokens are already spent")
	}
	var birth *fencelog.Birth
	switch {
	case *fresh:
		birth = fencelog.Fresh()
	case *floor != "":
		n, err := strconv.ParseUint(*floor, 10, 64)
		if err != nil || n > fence.MaxToken {
			return usageErr("--floor %q: want a whole number from 0 to 2^63-1", *floor)
		}
		birth = &fencelog.Birth{Floor: n, Why: fmt.Sprintf("--floor %d", n)}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(cfg.Store); err == nil {
		return fmt.Errorf("store %s already exists; init never touches an existing store", cfg.Store)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store %s: %w", cfg.Store, err)
	}
	if *fromEtcd != "" {
		rev, err := etcdRevision(ctx, *fromEtcd)
		if err != nil {
			return err
		}
		birth = &fencelog.Birth{Floor: uint64(rev), Why: fmt.Sprintf("--floor-from-etcd %s: revision %d", *fromEtcd, rev)}
	}
	l, err := fencelog.Open(cfg.Store, &fencelog.Options{Create: birth, Gateway: cfg.ID, AuditFlush: -1})
	if err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created store %s: every token up to %d is stale (%s)\n", cfg.Store, birth.Floor, birth.Why)
	return nil
}

func countSet(flags ...bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	return n
}

// memoryLimit is the gateway's soft memory limit unless GOMEMLIMIT says
// otherwise: the garbage collector works harder as the Go heap nears it
// (fewer bytes held between collections, a little more CPU under a load of
// thousands of commands in flight), and nothing fails above it. A
// gateway's live heap is a few MB; without a limit, a burst of commands
// lets the heap double before each collection.
const memoryLimit = 20 << 20

// softMemoryLimit sets memoryLimit, unless GOMEMLIMIT is set.
func softMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
