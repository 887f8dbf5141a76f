// Package bench measures a gateway on the machine and disk it runs on:
// `gateway bench`. It runs the real gateway as a child process on the sim
// board with a fresh store, drives it with MQTT controllers in this
// process, and reports, from one run, the command→answer latency, the
// applied commands per second, the store's syncs per applied command, the
// gateway process's CPU time and memory, and the floors those figures are
// bounded by, measured in the same run on the same machine, broker and
// disk:
//
//   - the broker's QoS 1 round trip without the gateway: a controller and
//     an echo client that answers in the gateway's place (sequential);
//   - the broker's echo throughput with the same controllers and window;
//   - one bbolt commit (with its syncs) in the store's directory.
//
// # Profiles
//
//   - single: 1 actuator, 1 controller, one command at a time.
//   - fleet: every controller owns one actuator (its own fence scope and
//     token) and keeps a window of commands in flight, with strictly
//     increasing seq, alternating on and off, so that each is applied and
//     drives its output; 16 × 16 and 64 × 64 (the sim board's header
//     pins and its expanders' lines).
//   - shared: every controller commands the same 16 actuators in turn,
//     each command under a token of its own from one source (as a lease
//     service's revisions, with many workers contending for shared
//     resources): applied, or stale when a later token reached the
//     actuator first; 16 and 64 controllers, window 32. It counts the
//     answers delivered per command, which the shared result topic
//     multiplies by the controllers listening there (SharedAnswers), and
//     compares with the broker's echo of the same topology.
//   - storm: a quarter of the scopes have a flapping controller that sends
//     nine stale commands in ten (a token below the fence) while the other
//     controllers work on their own scopes; the fresh commands' p99 is
//     compared with the same load without the storm, and the stale
//     commands alone are sent to count the syncs they cost (none).
//   - sdcard: the fleet with every store commit slowed to an SD card's
//     (a gateway built with the failpoints tag: see [EnvCommitDelay]).
//   - soak (alone, not in all): 16 controllers keep a few commands each in
//     flight for minutes, with stale and duplicate commands among them,
//     a controller reconnecting and a client of the event stream coming
//     and going every round, while the gateway's goroutines, heap and
//     resident memory are sampled; the run fails if they grew (see
//     [Report.Err]).
//
// The package runs the gateway as a program, never in its own process, so
// that the figures are the gateway's alone and a user's installed binary
// can be measured; it imports neither the gateway's service nor its MQTT
// link.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"
)

// Profile names.
const (
	Single = "single"
	Fleet  = "fleet"
	Shared = "shared"
	Storm  = "storm"
	SDCard = "sdcard"
	Soak   = "soak"
	All    = "all"
)

// Profiles lists the profiles of All in the order they run; Soak, which
// lasts minutes, runs alone.
var Profiles = []string{Single, Fleet, Shared, Storm, SDCard}

// fleetSizes are the fleet profile's actuators (and controllers).
var fleetSizes = []int{16, 64}

// sharedSizes are the shared profile's controllers, on sharedActuators.
var sharedSizes = []int{16, 64}

// Defaults.
const (
	DefaultDuration    = 5 * time.Second
	DefaultWarmup      = time.Second
	DefaultSDCardDelay = 15 * time.Millisecond
	fleetWindow        = 32
	sharedActuators    = 16
	sharedWindow       = 32
	stormActuators     = 16
	stormWindow        = 8
	maxWindow          = 1000
)

// ErrUsage marks an Options error: a flag to correct.
var ErrUsage = errors.New("bench: bad usage")

// Options configure Run.
type Options struct {
	// Gateway is the command that runs the gateway binary: its path, and
	// any arguments before "run" or "init".
	Gateway []string
	// Broker is the MQTT broker's URL; BrokerName says what it is for
	// the report ("embedded", or the URL).
	Broker, BrokerName string
	// StoreDir holds the stores (each in a directory of its own, removed
	// afterwards) and the commit floor's file; empty means the temporary
	// directory. To measure what the store costs, it must be on the disk
	// the real store uses.
	StoreDir string
	// Profiles to run (see [Profiles]); empty or "all" means every one.
	Profiles []string
	// Actuators, Controllers and Window, if not zero, replace those of
	// every profile run.
	Actuators, Controllers, Window int
	// Commands, if not zero, is the number of commands of each measured
	// phase (shared among its controllers); otherwise each phase lasts
	// Duration (zero means DefaultDuration, or DefaultSoakDuration for the
	// soak, which takes no Commands).
	Commands int
	Duration time.Duration
	// SampleInterval is the time between the soak's samples (zero means
	// DefaultSampleInterval); only the soak takes it.
	SampleInterval time.Duration
	// Warmup is the phase before each measured one (zero means
	// DefaultWarmup; negative means none but one command per controller).
	Warmup time.Duration
	// SDCardDelay is the sdcard profile's slowed commit (zero means
	// DefaultSDCardDelay).
	SDCardDelay time.Duration
	// CommitDelay says that the gateway slows its commits as
	// EnvCommitDelay asks (a failpoints build); without it the sdcard
	// profile is skipped, or an error when it is the only one asked for.
	CommitDelay bool
	// Progress, if set (a terminal), shows a progress bar.
	Progress io.Writer
	// Version is the gateway's version, for the report.
	Version string
	// SharedAnswers makes the controllers name no reply topic: the
	// gateway (and the echo) answer on the actuators' shared result
	// topics, to every controller listening there, as controllers did
	// before reply topics.
	SharedAnswers bool

	root   string              // this run's directory under StoreDir
	echoes map[topology]echoed // floor (b), by topology
	prog   *progress
	// onSample, if set, runs after each of the soak's samples (tests).
	onSample func(*gateway)
}

type echoed struct {
	perS    float64
	latency Latency
	heard   float64 // answers delivered per command
}

// Run runs the profiles o names and returns their report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if len(o.Gateway) == 0 {
		return nil, errors.New("bench: no gateway command")
	}
	if o.Broker == "" {
		return nil, fmt.Errorf("%w: no broker: give --broker URL", ErrUsage)
	}
	if o.BrokerName == "" {
		o.BrokerName = o.Broker
	}
	if err := os.MkdirAll(o.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: --store-dir: %w", err)
	}
	root, err := os.MkdirTemp(o.StoreDir, "fencegate-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w (--store-dir must be a writable directory)", err)
	}
	defer os.RemoveAll(root)
	o.root, o.echoes = root, map[topology]echoed{}
	r := &Report{Version: o.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		Broker: o.BrokerName, StoreDir: o.StoreDir, Profiles: []Result{}}
	if fs := fsType(o.StoreDir); fs != "" {
		r.StoreFS = fs
		if fs == "tmpfs" || fs == "ramfs" {
			r.note("the store directory %s is on %s, in memory: a sync costs nothing there; give --store-dir on the disk the real store uses", o.StoreDir, fs)
		}
	}
	o.prog = newProgress(o.Progress, o.plan())
	defer o.prog.done()

	if o.soakOnly() { // no floors: the soak judges the gateway against itself
		res, err := o.soak(ctx)
		if err != nil {
			return nil, err
		}
		r.Profiles = append(r.Profiles, res)
		return r, nil
	}
	r.Floors = &Floors{}
	o.prog.next("floor: bbolt commit", limit{count: 1000})
	commits, err := commitFloor(root, 1000, 2*time.Second)
	if err != nil {
		return nil, err
	}
	r.Floors.Commit = latencyOf(commits)
	e, err := o.echo(ctx, topology{1, 1, 0})
	if err != nil {
		return nil, err
	}
	r.Floors.BrokerRTT = e.latency
	if slices.Contains(o.Profiles, Single) {
		c, err := o.composedFloor(ctx)
		if err != nil {
			return nil, err
		}
		r.Floors.RoundTripWithCommit = &c
	}

	for _, p := range o.Profiles {
		switch p {
		case Single:
			res, err := o.load(ctx, r, Single, Single, 0, 0)
			if err != nil {
				return nil, err
			}
			r.Profiles = append(r.Profiles, res)
		case Fleet, SDCard:
			sizes := o.sizes(p)
			var delay time.Duration
			if p == SDCard {
				delay = o.SDCardDelay
				if !o.CommitDelay {
					r.Profiles = append(r.Profiles, Result{Name: SDCard, Profile: SDCard, Skipped: errNoDelay})
					continue
				}
			}
			for _, size := range sizes {
				name := p
				if p == Fleet {
					n, m, _ := o.shape(p, size)
					name = fmt.Sprintf("fleet-%dx%d", n, m)
				}
				res, err := o.load(ctx, r, p, name, size, delay)
				if err != nil {
					return nil, err
				}
				r.Profiles = append(r.Profiles, res)
			}
		case Shared:
			for _, size := range o.sizes(p) {
				n, m, _ := o.shape(p, size)
				res, err := o.load(ctx, r, p, fmt.Sprintf("shared-%dx%d", n, m), size, 0)
				if err != nil {
					return nil, err
				}
				r.Profiles = append(r.Profiles, res)
			}
		case Storm:
			res, err := o.storm(ctx, r)
			if err != nil {
				return nil, err
			}
			r.Profiles = append(r.Profiles, res)
		}
	}
	return r, nil
}

// perSecond is the rate of n answers over t's measured span.
func perSecond(n int, t *tally) float64 {
	s := t.last.Sub(t.first).Seconds()
	if n == 0 || s <= 0 {
		return 0
	}
	return float64(n) / s
}

// measured is a running gateway's counters at a moment.
type measured struct {
	commits, writes uint64
	use             usage
	useErr          error
}

func (g *gateway) measure(ctx context.Context) (measured, error) {
	var m measured
	var err error
	m.commits, m.writes, err = g.commits(ctx)
	m.use, m.useErr = g.usage()
	return m, err
}
