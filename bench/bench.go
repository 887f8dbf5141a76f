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
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/wire"
)

// Profile names.
const (
	Single = "single"
	Fleet  = "fleet"
	Storm  = "storm"
	SDCard = "sdcard"
	Soak   = "soak"
	All    = "all"
)

// Profiles lists the profiles of All in the order they run; Soak, which
// lasts minutes, runs alone.
var Profiles = []string{Single, Fleet, Storm, SDCard}

// fleetSizes are the fleet profile's actuators (and controllers).
var fleetSizes = []int{16, 64}

// Defaults.
const (
	DefaultDuration    = 5 * time.Second
	DefaultWarmup      = time.Second
	DefaultSDCardDelay = 15 * time.Millisecond
	fleetWindow        = 32
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

	root   string            // this run's directory under StoreDir
	echoes map[[2]int]echoed // floor (b), by controllers and window
	prog   *progress
	// onSample, if set, runs after each of the soak's samples (tests).
	onSample func(*gateway)
}

type echoed struct {
	perS    float64
	latency Latency
}

// Check fills in o's defaults and checks its figures (not the gateway
// command or the broker, which Run checks): an error wraps ErrUsage and
// names the flag of gateway bench to correct. Run checks again.
func (o *Options) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
	}
	for _, p := range o.Profiles {
		if !slices.Contains(Profiles, p) && p != Soak && p != All {
			return bad("--profile %q: want %s, %s or %s", p, strings.Join(Profiles, ", "), Soak, All)
		}
	}
	soak := slices.Contains(o.Profiles, Soak)
	if soak && len(o.Profiles) > 1 {
		return bad("--profile %s: the soak runs alone (it lasts minutes and judges one gateway): give --profile %s without other profiles", strings.Join(o.Profiles, ","), Soak)
	}
	if len(o.Profiles) == 0 || slices.Contains(o.Profiles, All) {
		o.Profiles = Profiles
	}
	if err := o.checkSoak(bad); err != nil {
		return err
	}
	switch {
	case o.Actuators < 0 || o.Actuators > MaxActuators:
		return bad("--actuators %d: want 1 to %d (the sim board's outputs: GPIO0 to GPIO27 and its expanders' lines)", o.Actuators, MaxActuators)
	case o.Controllers < 0:
		return bad("--controllers %d: want 1 or more", o.Controllers)
	case o.Window < 0 || o.Window > maxWindow:
		return bad("--window %d: want 1 to %d", o.Window, maxWindow)
	case o.Commands < 0:
		return bad("--commands %d: want 1 or more", o.Commands)
	case o.Commands > 0 && o.Duration > 0:
		return bad("give --commands or --duration, not both")
	case !soak && (o.Duration < 0 || o.Duration > time.Hour):
		return bad("--duration %v: want more than 0 and at most 1h", o.Duration)
	case o.SDCardDelay < 0 || o.SDCardDelay > time.Second:
		return bad("--sdcard-delay %v: want 0 to 1s", o.SDCardDelay)
	case o.Warmup > time.Hour:
		return bad("--warmup %v: want at most 1h", o.Warmup)
	}
	for _, p := range o.Profiles {
		for _, size := range fleetSizes {
			n, m, _ := o.shape(p, size)
			if m > n {
				return bad("profile %s: %d controllers for %d actuators: each controller owns one actuator; give --controllers at most --actuators", p, m, n)
			}
			if p == Storm && m < 2 {
				return bad("profile storm needs at least 2 controllers (flapping ones and calm ones)")
			}
			if o.Commands > 0 && o.Commands < m {
				return bad("--commands %d: at least one per controller (%d) in profile %s", o.Commands, m, p)
			}
		}
	}
	if slices.Equal(o.Profiles, []string{SDCard}) && !o.CommitDelay {
		return bad("%s", errNoDelay)
	}
	if o.Duration == 0 && o.Commands == 0 {
		o.Duration = DefaultDuration
		if soak {
			o.Duration = DefaultSoakDuration
		}
	}
	if o.Warmup == 0 {
		o.Warmup = DefaultWarmup
	}
	if o.SDCardDelay == 0 {
		o.SDCardDelay = DefaultSDCardDelay
	}
	if o.StoreDir == "" {
		o.StoreDir = os.TempDir()
	}
	return nil
}

// checkSoak checks the soak's options, and that only the soak has a
// SampleInterval; it fills in the soak's defaults.
func (o *Options) checkSoak(bad func(string, ...any) error) error {
	if !o.soakOnly() {
		if o.SampleInterval != 0 {
			return bad("--sample-interval: only the soak takes it (--profile %s)", Soak)
		}
		return nil
	}
	switch {
	case o.Commands > 0:
		return bad("--commands: the soak runs for a --duration (default %v), not a number of commands", DefaultSoakDuration)
	case o.Duration < 0 || o.Duration > maxSoakDuration:
		return bad("--duration %v: want more than 0 and at most %v for the soak", o.Duration, maxSoakDuration)
	case o.SampleInterval < 0 || (o.SampleInterval > 0 && o.SampleInterval < minSampleEvery):
		return bad("--sample-interval %v: want %v or more", o.SampleInterval, minSampleEvery)
	case o.Window > maxSoakWindow:
		return bad("--window %d: the soak's duplicates must stay among the gateway's %d recent commands of their scope: give at most %d",
			o.Window, fence.Window, maxSoakWindow)
	}
	if o.Duration == 0 {
		o.Duration = DefaultSoakDuration
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if n := int(o.Duration/o.SampleInterval) + 1; n < minSoakSamples {
		return bad("--duration %v with --sample-interval %v: %d samples, and the soak needs at least %d to judge growth (a warm-up and thirds to compare); give a longer --duration or a shorter --sample-interval",
			o.Duration, o.SampleInterval, n, minSoakSamples)
	}
	return nil
}

// soakOnly reports whether o runs the soak (which runs alone).
func (o *Options) soakOnly() bool { return slices.Equal(o.Profiles, []string{Soak}) }

// errNoDelay is why the sdcard profile does not run in a normal build.
const errNoDelay = "the sdcard profile needs a gateway built with -tags failpoints, which can slow its store's commits " +
	"(make bench builds one; or go build -tags failpoints ./cmd/gateway); this build never slows its store"

// shape returns a profile's actuators, controllers and window; size is
// the fleet's size (ignored by the other profiles).
func (o *Options) shape(profile string, size int) (actuators, controllers, window int) {
	switch profile {
	case Single:
		actuators, window = 1, 1
	case Fleet, SDCard:
		actuators, window = fleetSizes[0], fleetWindow
		if size > 0 {
			actuators = size
		}
	case Storm:
		actuators, window = stormActuators, stormWindow
	case Soak:
		actuators, window = soakActuators, soakWindow
	}
	if o.Actuators > 0 {
		actuators = o.Actuators
	}
	controllers = actuators
	if o.Controllers > 0 {
		controllers = o.Controllers
	}
	if o.Window > 0 {
		window = o.Window
	}
	return actuators, controllers, window
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
	o.root, o.echoes = root, map[[2]int]echoed{}
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
	e, err := o.echo(ctx, 1, 1)
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
			sizes := fleetSizes
			var delay time.Duration
			if p == SDCard {
				sizes, delay = sizes[:1], o.SDCardDelay
				if !o.CommitDelay {
					r.Profiles = append(r.Profiles, Result{Name: SDCard, Profile: SDCard, Skipped: errNoDelay})
					continue
				}
			}
			if o.Actuators > 0 {
				sizes = sizes[:1]
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

// limit returns a measured phase's limit for controller i of n.
func (o *Options) limit(n int) func(i int) limit {
	deadline := time.Now().Add(o.Duration)
	return func(i int) limit {
		if o.Commands > 0 {
			return limit{count: split(o.Commands, n, i)}
		}
		return limit{deadline: deadline}
	}
}

// phaseLimit is the progress bar's view of a measured phase.
func (o *Options) phaseLimit() limit {
	if o.Commands > 0 {
		return limit{count: o.Commands}
	}
	return limit{deadline: time.Now().Add(o.Duration)}
}

// warmup runs g's warm-up: fresh commands, at least one per controller.
func (o *Options) warmup(ctx context.Context, g group, window int, label string) error {
	o.prog.next(label+": warm-up", limit{deadline: time.Now().Add(max(o.Warmup, 0))})
	deadline := time.Now().Add(max(o.Warmup, 0))
	_, err := g.run(ctx, window, nil, func(int) limit { return limit{deadline: deadline} }, o.prog.answer)
	return err
}

// echo measures the broker's floors with m controllers and window w (and
// keeps them for the run): throughput, and latency.
func (o *Options) echo(ctx context.Context, m, w int) (echoed, error) {
	if e, ok := o.echoes[[2]int{m, w}]; ok {
		return e, nil
	}
	label := fmt.Sprintf("floor: broker echo %d×%d", m, w)
	if m == 1 && w == 1 {
		label = "floor: broker round trip"
	}
	e, err := o.echoFloor(ctx, m, w, label, nil)
	if err == nil {
		o.echoes[[2]int{m, w}] = e
	}
	return e, err
}

// composedFloor measures the broker round trip with one floor commit (in a
// store of its own, in the stores' directory) in the echo before each
// answer, one command at a time: the two floors composed as a gateway
// composes them, with a hand-over from paho's handler to the goroutine
// that commits and answers, and nothing else.
func (o *Options) composedFloor(ctx context.Context) (Latency, error) {
	commit, closeStore, err := floorStore(o.root, "composed-floor.db")
	if err != nil {
		return Latency{}, err
	}
	defer closeStore()
	e, err := o.echoFloor(ctx, 1, 1, "floor: round trip with a commit", commit)
	return e.latency, err
}

// echoFloor measures an echo (with commit before each answer, if set) with
// m controllers and w commands in flight each.
func (o *Options) echoFloor(ctx context.Context, m, w int, label string, commit func() error) (echoed, error) {
	id := fmt.Sprintf("bench-%d-echo", os.Getpid())
	topics := wire.Topics{GatewayID: id}
	ec, err := startEcho(ctx, o.Broker, id, topics, commit)
	if err != nil {
		return echoed{}, err
	}
	defer ec.close()
	g, err := dial(ctx, o.Broker, id, topics, m, w)
	if err != nil {
		return echoed{}, err
	}
	defer g.close()
	if err := o.warmup(ctx, g, w, label); err != nil {
		return echoed{}, err
	}
	o.prog.next(label, o.phaseLimit())
	t, err := g.run(ctx, w, nil, o.limit(m), o.prog.answer)
	if err != nil {
		return echoed{}, fmt.Errorf("bench: %s: %w", label, err)
	}
	if err := ec.end(); err != nil {
		// A commit that fails fails fast: the floor would be too low.
		return echoed{}, fmt.Errorf("bench: %s: %w", label, err)
	}
	return echoed{perS: perSecond(t.answered(fresh), t), latency: latencyOf(t.latency[fresh])}, nil
}

// dial connects m controllers for the first m actuators (a00, a01, …) of
// the gateway (or echo) with topics.
func dial(ctx context.Context, broker, id string, topics wire.Topics, m, w int) (group, error) {
	var g group
	for i := range m {
		c, err := dialController(ctx, broker, fmt.Sprintf("%s-c%02d", id, i), topics, fmt.Sprintf("a%02d", i), w)
		if err != nil {
			g.close()
			return nil, err
		}
		g = append(g, c)
	}
	return g, nil
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

// begin starts the gateway of res (name, res.Actuators, commits slowed by
// delay) and connects its controllers; it sets res's start time and idle
// memory. The caller closes the controllers and kills the gateway.
func (o *Options) begin(ctx context.Context, res *Result, name string, delay time.Duration) (*gateway, group, error) {
	o.prog.next(name+": gateway start", limit{})
	gw, err := startGateway(ctx, o, name, res.Actuators, delay)
	if err != nil {
		return nil, nil, err
	}
	res.OnlineMs = ms(gw.up)
	g, err := dial(ctx, o.Broker, gw.id, gw.topics, res.Controllers, res.Window)
	if err != nil {
		gw.kill()
		return nil, nil, err
	}
	if u, err := gw.usage(); err == nil && u.RSS > 0 {
		res.IdleRSSMB = ptr(mb(u.RSS))
		if u.RSSAnon > 0 {
			res.IdleAnonMB = ptr(mb(u.RSSAnon))
		}
	}
	return gw, g, nil
}

// load runs one fleet-like profile (single, fleet, sdcard): a gateway with
// its actuators, its controllers' warm-up, and one measured phase.
func (o *Options) load(ctx context.Context, r *Report, profile, name string, size int, delay time.Duration) (Result, error) {
	n, m, w := o.shape(profile, size)
	res := Result{Name: name, Profile: profile, Actuators: n, Controllers: m, Window: w, CommitDelayMs: ms(delay)}
	e, err := o.echo(ctx, m, w)
	if err != nil {
		return res, err
	}
	res.EchoPerS = &e.perS
	gw, g, err := o.begin(ctx, &res, name, delay)
	if err != nil {
		return res, err
	}
	defer gw.kill()
	defer g.close()
	answered := o.prog.count()
	if err := o.warmup(ctx, g, w, name); err != nil {
		return res, fmt.Errorf("bench: %s: %w\n%s", name, err, gw.stderr)
	}
	before, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	o.prog.next(name, o.phaseLimit())
	t, err := g.run(ctx, w, nil, o.limit(m), o.prog.answer)
	if err != nil {
		return res, fmt.Errorf("bench: %s: %w\n%s", name, err, gw.stderr)
	}
	after, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	res.phase(t, before, after)
	res.Latency = latencyOf(t.latency[fresh])
	ps, err := gw.stop()
	if err != nil {
		return res, err
	}
	res.usage(before, after, ps, o.prog.count()-answered)
	res.ratios(r, ms(delay))
	return res, nil
}

// storm runs the storm profile on one gateway: a calm phase (the calm
// controllers alone), the storm (with the flapping controllers), and the
// stale commands alone, to count their syncs.
func (o *Options) storm(ctx context.Context, r *Report) (Result, error) {
	n, m, w := o.shape(Storm, 0)
	flappers := max(1, m/4)
	res := Result{Name: Storm, Profile: Storm, Actuators: n, Controllers: m, Window: w}
	st := &StormResult{Flapping: flappers, Calm: m - flappers}
	res.Storm = st
	gw, all, err := o.begin(ctx, &res, Storm, 0)
	if err != nil {
		return res, err
	}
	defer gw.kill()
	defer all.close()
	answered := o.prog.count()
	flap, calm := all[:flappers], all[flappers:]
	if err := o.warmup(ctx, all, w, Storm); err != nil {
		return res, fmt.Errorf("bench: storm: %w\n%s", err, gw.stderr)
	}
	fail := func(err error) (Result, error) { return res, fmt.Errorf("bench: storm: %w\n%s", err, gw.stderr) }

	// Calm: the calm controllers alone.
	o.prog.next("storm: without the storm", o.phaseLimit())
	tc, err := calm.run(ctx, w, nil, o.limit(len(calm)), o.prog.answer)
	if err != nil {
		return fail(err)
	}
	calmLat := latencyOf(tc.latency[fresh])
	st.CalmP99Ms = calmLat.P99

	// The storm: the same calm load, and the flapping controllers.
	before, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	o.prog.next("storm: the storm", o.phaseLimit())
	lim := o.limit(m)
	var tf *tally
	var ferr error
	flapDone := make(chan struct{})
	go func() {
		defer close(flapDone)
		mixes := make([]mix, len(flap))
		for i := range mixes {
			mixes[i] = flapping
		}
		tf, ferr = flap.run(ctx, w, mixes, lim, o.prog.answer)
	}()
	ts, err := calm.run(ctx, w, nil, func(i int) limit { return lim(i + flappers) }, o.prog.answer)
	<-flapDone
	if err == nil {
		err = ferr
	}
	if err != nil {
		return fail(err)
	}
	after, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	stormLat := latencyOf(ts.latency[fresh])
	st.StormP99Ms = stormLat.P99
	st.StaleSent = tf.answered(stale)
	st.StaleAnswered = tf.outcomes[stale][fence.Stale]
	both := newTally()
	both.merge(ts)
	both.merge(tf)
	res.phase(both, before, after)
	res.Latency = stormLat

	// The stale commands alone: what they cost the store.
	o.prog.next("storm: stale commands alone", o.phaseLimit())
	b2, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	stales := make([]mix, len(flap))
	for i := range stales {
		stales[i] = allStale
	}
	tst, err := flap.run(ctx, w, stales, o.limit(len(flap)), o.prog.answer)
	if err != nil {
		return fail(err)
	}
	a2, err := gw.measure(ctx)
	if err != nil {
		return res, err
	}
	st.StaleOnly = tst.answered(stale)
	st.StaleOnlyStale = tst.outcomes[stale][fence.Stale]
	st.StaleOnlySyncs = 2 * (a2.commits - b2.commits)
	st.StaleOnlySeconds = tst.last.Sub(tst.first).Seconds()

	ps, err := gw.stop()
	if err != nil {
		return res, err
	}
	res.usage(before, after, ps, o.prog.count()-answered)
	res.ratios(r, 0)
	return res, nil
}
