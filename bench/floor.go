package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/wire"
	bolt "go.etcd.io/bbolt"
)

// Commit floor: one bbolt read-write transaction with one small put,
// committed (bbolt syncs the data, then the meta page), in a file of its
// own next to the stores, so on the same disk. No applied command can be
// answered faster than one such commit; a gateway that gives each command
// a commit of its own cannot apply more than 1/floor commands a second.

// commitFloor commits up to n transactions, for at most d, and returns
// their durations (at least minCommits of them, however long they take).
func commitFloor(dir string, n int, d time.Duration) ([]time.Duration, error) {
	const minCommits = 20
	commit, closeStore, err := floorStore(dir, "commit-floor.db")
	if err != nil {
		return nil, err
	}
	defer closeStore()
	var took []time.Duration
	deadline := time.Now().Add(d)
	for i := 0; i < n && (i < minCommits || time.Now().Before(deadline)); i++ {
		start := time.Now()
		if err := commit(); err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}

// floorStore opens a store of the floor's own, name in dir, and returns
// the floor's commit: one read-write transaction with one small put,
// committed with its syncs. closeStore closes and removes the store.
func floorStore(dir, name string) (commit func() error, closeStore func(), err error) {
	path := filepath.Join(dir, name)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: commit floor: %w (is --store-dir writable?)", err)
	}
	closeStore = func() { db.Close(); os.Remove(path) }
	bucket := []byte("floor")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err }); err != nil {
		closeStore()
		return nil, nil, fmt.Errorf("bench: commit floor: %w", err)
	}
	v := make([]byte, 200) // about a fence record with its window
	commit = func() error {
		v[0]++
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("k"), v) }); err != nil {
			return fmt.Errorf("bench: commit floor: %w", err)
		}
		return nil
	}
	return commit, closeStore, nil
}

// warmup runs g's warm-up: fresh commands, at least one per controller.
func (o *Options) warmup(ctx context.Context, g group, window int, label string) error {
	o.prog.next(label+": warm-up", limit{deadline: time.Now().Add(max(o.Warmup, 0))})
	deadline := time.Now().Add(max(o.Warmup, 0))
	_, err := g.run(ctx, window, nil, func(int) limit { return limit{deadline: deadline} }, o.prog.answer)
	return err
}

// A topology is who commands what: controllers, each with window
// commands in flight, on an actuator of its own each, or, if shared is
// not 0, all on the same shared actuators.
type topology struct{ controllers, window, shared int }

// echo measures the broker's floors with the topology tp (and keeps them
// for the run): throughput, and latency.
func (o *Options) echo(ctx context.Context, tp topology) (echoed, error) {
	if e, ok := o.echoes[tp]; ok {
		return e, nil
	}
	label := fmt.Sprintf("floor: broker echo %d×%d", tp.controllers, tp.window)
	switch {
	case tp.shared > 0:
		label = fmt.Sprintf("floor: broker echo %d×%d on %d shared", tp.controllers, tp.window, tp.shared)
	case tp == topology{1, 1, 0}:
		label = "floor: broker round trip"
	}
	e, err := o.echoFloor(ctx, tp, label, nil)
	if err == nil {
		o.echoes[tp] = e
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
	e, err := o.echoFloor(ctx, topology{1, 1, 0}, "floor: round trip with a commit", commit)
	return e.latency, err
}

// echoFloor measures an echo (with commit before each answer, if set) with
// the topology tp.
func (o *Options) echoFloor(ctx context.Context, tp topology, label string, commit func() error) (echoed, error) {
	id := fmt.Sprintf("bench-%d-echo", os.Getpid())
	topics := wire.Topics{GatewayID: id}
	ec, err := startEcho(ctx, o.Broker, id, topics, commit)
	if err != nil {
		return echoed{}, err
	}
	defer ec.close()
	g, err := o.dial(ctx, id, topics, tp)
	if err != nil {
		return echoed{}, err
	}
	defer g.close()
	if err := o.warmup(ctx, g, tp.window, label); err != nil {
		return echoed{}, err
	}
	o.prog.next(label, o.phaseLimit())
	t, err := g.run(ctx, tp.window, nil, o.limit(tp.controllers), o.prog.answer)
	if err != nil {
		return echoed{}, fmt.Errorf("bench: %s: %w", label, err)
	}
	if err := ec.end(); err != nil {
		// A commit that fails fails fast: the floor would be too low.
		return echoed{}, fmt.Errorf("bench: %s: %w", label, err)
	}
	return echoed{perS: perSecond(t.answered(fresh), t), latency: latencyOf(t.latency[fresh]), heard: t.heardPerCommand()}, nil
}

// dial connects the controllers of topology tp to the gateway (or echo)
// with topics: controller i commands actuator i (a00, a01, …), or, in a
// shared topology, every one of the first tp.shared in turn, starting
// with a different one each, under tokens from one source.
func (o *Options) dial(ctx context.Context, id string, topics wire.Topics, tp topology) (group, error) {
	var g group
	var tokens *atomic.Uint64
	var shared []string
	if tp.shared > 0 {
		tokens = new(atomic.Uint64)
		tokens.Store(1)
		for i := range tp.shared {
			shared = append(shared, fmt.Sprintf("a%02d", i))
		}
	}
	for i := range tp.controllers {
		ctl := newController(o.Broker, fmt.Sprintf("%s-c%02d", id, i), topics, fmt.Sprintf("a%02d", i), tp.window, o.SharedAnswers)
		if tp.shared > 0 {
			k := i % len(shared)
			ctl.name, ctl.actuators, ctl.tokens = shared[k], append(slices.Clone(shared[k:]), shared[:k]...), tokens
		}
		if err := ctl.connect(ctx); err != nil {
			g.close()
			return nil, err
		}
		g = append(g, ctl)
	}
	return g, nil
}
