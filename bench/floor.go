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
	path := filepath.Join(dir, "commit-floor.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("bench: commit floor: %w (is --store-dir writable?)", err)
	}
	defer os.Remove(path)
	defer db.Close()
	bucket := []byte("floor")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err }); err != nil {
		return nil, fmt.Errorf("bench: commit floor: %w", err)
	}
	v := make([]byte, 200) // about a fence record with its window
	var took []time.Duration
	deadline := time.Now().Add(d)
	for i := 0; i < n && (i < minCommits || time.Now().Before(deadline)); i++ {
		v[0] = byte(i)
		start := time.Now()
		err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("k"), v) })
		if err != nil {
			return nil, fmt.Errorf("bench: commit floor: %w", err)
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}
