package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
