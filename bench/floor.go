package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

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
