package fencelog

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// BenchmarkCommitFloor is one bbolt read-write transaction with one small
// put, fsynced: the floor an applied command cannot go below on this disk.
// Compare BenchmarkAdmitApplied with it in the same run.
func BenchmarkCommitFloor(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "floor.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err })
	v := make([]byte, 200)
	for i := 0; b.Loop(); i++ {
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put([]byte("k"), v) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitApplied admits a fresh pair each time: one fsynced commit
// with the fence, the intended state, the window and the audit entry.
func BenchmarkAdmitApplied(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "fence.db"), &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for i := 0; b.Loop(); i++ {
		c := fence.Command{ID: fmt.Sprint(i), Actuator: "pump", Holder: "bench", Fence: fence.Fence{Token: uint64(i + 1)}, State: fence.State(i%2 + 1)}
		if adm, err := l.Admit("pump", c, fence.Rules{}, nil); err != nil || adm.Outcome != fence.Applied {
			b.Fatalf("Admit = %v, %v", adm.Outcome, err)
		}
	}
}

// BenchmarkAdmitStale answers a stale command: a read-only decision and a
// buffered audit entry, no write.
func BenchmarkAdmitStale(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "fence.db"), &Options{Create: Fresh(), AuditFlush: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.Admit("pump", fence.Command{ID: "b", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOn}, fence.Rules{}, nil)
	c := fence.Command{ID: "a", Actuator: "pump", Fence: fence.Fence{Token: 41}, State: fence.StateOff}
	for b.Loop() {
		if adm, err := l.Admit("pump", c, fence.Rules{}, nil); err != nil || adm.Outcome != fence.Stale {
			b.Fatalf("Admit = %v, %v", adm.Outcome, err)
		}
	}
}

// BenchmarkGroupCommit: 16 writers, each admitting commands of its own
// scope one after the other, on a disk whose commit takes 5 ms (an SD
// card's is 10 to 20): per op one applied command. It reports the writes
// per commit, which should be near 16 (every writer in every commit), not
// near 8 (the writers taking turns, half in each commit).
func BenchmarkGroupCommit(b *testing.B) {
	const writers = 16
	l, err := Open(filepath.Join(b.TempDir(), "fence.db"), &Options{Create: Fresh(), AuditFlush: -1, CommitDelay: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var next atomic.Int64
	before := l.Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := fmt.Sprint("s", w)
			for i := uint64(1); next.Add(1) <= int64(b.N); i++ {
				c := fence.Command{ID: fmt.Sprint(w, "-", i), Actuator: scope, Fence: fence.Fence{Token: i}, State: fence.State(i%2 + 1)}
				if adm, err := l.Admit(scope, c, fence.Rules{}, nil); err != nil || adm.Outcome != fence.Applied {
					b.Errorf("Admit = %v, %v", adm.Outcome, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	after := l.Stats()
	if c := after.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(after.Writes-before.Writes)/float64(c), "writes/commit")
	}
}
