package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/boards/pinmap"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/mqttlink"
	"github.com/fencegate/fencegate/pwmio"
)

// ErrStoreDir is returned (wrapped) by Run and Check when the store's
// directory cannot hold a store: missing, not writable, or not a real
// filesystem. A restart cannot fix it.
var ErrStoreDir = errors.New("service: the store's directory cannot hold the fence store")

// Finding is one step of Check.
type Finding struct {
	// Step names what was checked: "store directory", "store", "board",
	// "modbus", "http", "broker".
	Step string
	// Text says what was found.
	Text string
	// Err is why Run would fail at this step; nil if it would not.
	Err error
	// Warning is a problem Run does not stop for.
	Warning bool
}

// CheckOptions configure Check.
type CheckOptions struct {
	// Init checks as `run --init` would: a missing store would be created.
	Init bool
	// Broker, if set, also connects to the broker with the configured
	// credentials (as a separate client, so that a running gateway keeps
	// its session). Run does not stop for a broker it cannot reach (it
	// keeps trying), so a failure is a warning.
	Broker bool
}

// Check runs the start-up steps of Run on cfg without taking anything
// over: it opens the store read-only, checks that its directory is a
// writable, real filesystem, that the board and its lines are there, that
// the HTTP address is free and, optionally, that the broker accepts the
// gateway. Run would start exactly when no finding has an Err.
func Check(ctx context.Context, cfg *config.Config, o CheckOptions) []Finding {
	var out []Finding
	add := func(step, text string, err error) { out = append(out, Finding{Step: step, Text: text, Err: err}) }

	dir := filepath.Dir(cfg.Store)
	if err := checkStoreDir(cfg.Store); err != nil {
		add("store directory", dir, err)
	} else if warn := storeDirWarning(dir); warn != "" {
		out = append(out, Finding{Step: "store directory", Text: warn, Warning: true})
	} else if _, err := os.Stat(dir); err != nil {
		add("store directory", fmt.Sprintf("%s does not exist yet; run --init (or init) would create it in %s, which is writable", dir, existingAncestor(dir)), nil)
	} else {
		add("store directory", dir+": writable", nil)
	}

	switch l, err := fencelog.Open(cfg.Store, &fencelog.Options{ReadOnly: true, Gateway: cfg.ID, Timeout: 500 * time.Millisecond}); {
	case errors.Is(err, fencelog.ErrNotExist) && o.Init:
		add("store", cfg.Store+": missing; --init would create it", nil)
	case errors.Is(err, fencelog.ErrLocked):
		add("store", cfg.Store, fmt.Errorf("%w: a running gateway holds it, and run would fail while it runs", err))
	case err != nil:
		add("store", cfg.Store, err)
	default:
		fences, ferr := l.Fences()
		l.Close()
		if ferr != nil {
			add("store", cfg.Store, ferr)
			break
		}
		f, werr := os.OpenFile(cfg.Store, os.O_RDWR, 0)
		if werr != nil {
			add("store", cfg.Store, fmt.Errorf("%w: %v (run opens it for writing)", fencelog.ErrUnwritable, werr))
			break
		}
		f.Close()
		add("store", fmt.Sprintf("%s: a fencegate store (id %s), %s, %s", cfg.Store, l.ID(), describeFloor(l.Birth()), describeFences(fences)), nil)
	}

	if r, err := boards.Check(boards.Options{Board: cfg.Board, Store: cfg.Store, Lines: outputLines(cfg), Inputs: inputLines(cfg)}); err != nil {
		add("board", cfg.Board, err)
	} else {
		add("board", r.Board, nil)
		for _, w := range r.Warnings {
			a := boardActuators(cfg)[w.Line]
			out = append(out, Finding{Step: "board", Text: fmt.Sprintf("actuator %q on %s: %s", a.Name, pinmap.Describe(a.Output()), w.Text), Warning: true})
		}
	}

	out = append(out, modbusFindings(cfg)...)
	out = append(out, pwmFindings(cfg, pwmio.DefaultSysfs)...)

	if addr := cfg.HTTPAddr(); addr == "" {
		add("http", "disabled", nil)
	} else if ln, err := listenHTTP(addr); err != nil {
		add("http", addr, err)
	} else {
		ln.Close()
		add("http", addr+": free", nil)
	}

	sec, err := cfg.MQTT.Security()
	if err != nil {
		add("broker", cfg.MQTT.Broker, err)
		return out
	}
	out = append(out, securityFindings(sec, time.Now())...)
	if o.Broker {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := mqttlink.Probe(pctx, mqttlink.Options{Broker: cfg.MQTT.Broker, Username: cfg.MQTT.Username, Password: sec.Password,
			TLS: sec.TLS, Settings: sec.Settings, ClientID: fmt.Sprintf("fencegate-%s-check-%d", cfg.ID, os.Getpid())})
		cancel()
		if err != nil {
			out = append(out, Finding{Step: "broker", Text: fmt.Sprintf("%s: %v (run would keep trying)", cfg.MQTT.Broker, err), Warning: true})
		} else {
			add("broker", cfg.MQTT.Broker+": accepts the gateway's credentials", nil)
		}
	}
	return out
}

func describeFences(fences map[string]fence.Fence) string {
	if len(fences) == 0 {
		return "no fence yet"
	}
	names := make([]string, 0, len(fences))
	for n := range fences {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fmt.Sprintf("%d scopes:", len(names))
	for _, n := range names {
		s += fmt.Sprintf(" %s %s", n, fences[n])
	}
	return s
}

// existingAncestor returns dir or its nearest ancestor that exists.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

// checkStoreDir checks that the store's directory (or, for a store that
// --init would create, its nearest existing ancestor) is a writable
// directory on a real filesystem.
func checkStoreDir(store string) error {
	dir := existingAncestor(filepath.Dir(store))
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStoreDir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrStoreDir, dir)
	}
	if why := unfitFilesystem(dir); why != "" {
		return fmt.Errorf("%w: %s is on %s; put the store on the disk (e.g. /var/lib/fencegate)", ErrStoreDir, dir, why)
	}
	if err := writable(dir); err != nil {
		return fmt.Errorf("%w: %s is not writable by this user (%v); fix its owner or mode, or the mount", ErrStoreDir, dir, err)
	}
	return nil
}

// storeDirWarning says why a store directory that works is still a bad
// place, or "".
func storeDirWarning(dir string) string {
	if why := volatileFilesystem(dir); why != "" {
		return fmt.Sprintf("%s is on %s, which is emptied at every reboot: the fence store would be lost, and a fresh store accepts tokens the old one refused", dir, why)
	}
	return ""
}

// describeFloor says which tokens a store refuses from birth.
func describeFloor(b fencelog.Birth) string {
	switch {
	case b.Why == "":
		return "no floor recorded (made before floors existed)"
	case b.Floor == 0:
		return "floor 0 (" + b.Why + ")"
	}
	return fmt.Sprintf("floor %d: every token up to it is stale (%s)", b.Floor, b.Why)
}
