package fencelog

import (
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write of the store is a function run in a bbolt
// read-write transaction, and every commit costs the disk two syncs (bbolt
// writes the changed pages, syncs, writes the meta page, syncs). Writes
// that arrive while a commit is in progress wait, and the next commit runs
// them all in one transaction: commands of many scopes share its syncs. A
// lone write waits for no timer (bbolt's Batch waits up to 10 ms for
// company), so a single command costs one commit and no more.
//
// No write returns before the commit that holds it did, and the fsync with
// it: a command's output is driven only after that. The caller's own order
// is kept (a scope's lock is held across its write, so each scope's writes
// commit in order). One write that fails (a damaged record) fails alone:
// the batch is rolled back and each write of it run in a transaction of its
// own.

// committer queues writes for the next commit. The first writer to find no
// commit in progress leads: it commits batches until its own is done, then
// hands the lead to the first writer still waiting, so no writer commits
// others' writes for ever and no goroutine is left running.
type committer struct {
	mu      sync.Mutex
	queue   []*write
	leading bool
	grew    chan struct{} // 1-buffered: a write was queued

	commits atomic.Uint64 // transactions committed
	writes  atomic.Uint64 // writes they held
	running atomic.Int64  // when the commit in progress began, as 1 + ns since epoch; 0: none
}

type write struct {
	fn   func(*bolt.Tx) error
	done chan error    // the write's result, once its commit returned
	lead chan struct{} // this writer commits the next batch
}

// testHookCommitted, if set (by tests), runs after a batch's transaction
// committed, before any of its writers learns it.
var testHookCommitted func(writes int)

// update runs fn in a read-write transaction, commits it (fsynced), and
// then checks that the store's path still names the file that was
// written: a store deleted or replaced while the gateway runs would take
// commits that no restart can read, and answer them applied. fn may run
// more than once (a batch with a failing write is run again write by
// write); each run starts from a rolled-back state, so fn must set, not
// accumulate, what it reports.
func (l *Store) update(fn func(*bolt.Tx) error) error {
	w := &write{fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	g := &l.commit
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	select {
	case g.grew <- struct{}{}:
	default:
	}
	if lead {
		l.lead()
	}
	for {
		select {
		case err := <-w.done:
			return err
		case <-w.lead:
			l.lead()
		}
	}
}

// lead commits the writes queued now, then passes the lead on.
//
// The writers of a batch come back with their next writes a little after
// their commit (each drives its output and answers first): a next commit
// that started at once would hold only the writers that came during this
// one, and the writers would split into groups that take turns, each in
// every other commit. So after a batch of several writes the lead waits
// for as many writes as this batch held and the queue holds, up to a
// quarter of what this commit took (at most 2 ms), in a goroutine of its
// own, so that this batch's writers go on meanwhile. A lone writer never
// waits: after a batch of one with nothing queued the lead ends.
func (l *Store) lead() {
	g := &l.commit
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	start := time.Now()
	l.commitBatch(batch)
	wait := min(time.Since(start)/4, 2*time.Millisecond)
	g.mu.Lock()
	queued := len(g.queue)
	if len(batch) == 1 && queued == 0 {
		g.leading = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go l.pass(len(batch)+queued, wait)
}

// pass waits for company (see lead), then hands the lead to the first
// writer queued, or ends it if none is.
func (l *Store) pass(n int, wait time.Duration) {
	l.company(n, wait)
	g := &l.commit
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leading = false
		g.mu.Unlock()
		return
	}
	next := g.queue[0]
	g.mu.Unlock()
	next.lead <- struct{}{}
}

// company waits until n writes are queued, or for d.
func (l *Store) company(n int, d time.Duration) {
	g := &l.commit
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		g.mu.Lock()
		enough := len(g.queue) >= n
		g.mu.Unlock()
		if enough {
			return
		}
		select {
		case <-g.grew:
		case <-t.C:
			return
		}
	}
}

// commitBatch commits batch in one transaction and gives each write its
// result.
func (l *Store) commitBatch(batch []*write) {
	failed := false
	start := time.Now()
	l.commit.running.Store(int64(start.Sub(epoch)) + 1)
	defer l.commit.running.Store(0)
	l.staged = make(map[string]record)
	err := l.db.Update(func(tx *bolt.Tx) error {
		for _, w := range batch {
			if err := w.fn(tx); err != nil {
				failed = true
				return err
			}
		}
		return nil
	})
	staged := l.staged
	l.staged = nil
	if err == nil {
		l.cmu.Lock()
		for scope, rec := range staged {
			l.cache[scope] = rec
		}
		l.cmu.Unlock()
	}
	if failed && len(batch) > 1 {
		// One write failed and rolled back the others: each alone.
		for _, w := range batch {
			l.commitBatch([]*write{w})
		}
		return
	}
	if err == nil && l.opts.CommitDelay > 0 {
		time.Sleep(l.opts.CommitDelay)
	}
	if err == nil {
		g := &l.commit
		g.commits.Add(1)
		g.writes.Add(uint64(len(batch)))
		if l.opts.OnCommit != nil {
			l.opts.OnCommit(time.Since(start), len(batch))
		}
		if testHookCommitted != nil {
			testHookCommitted(len(batch))
		}
		err = l.sameFile()
	}
	for _, w := range batch {
		w.done <- err
	}
}

// Stats counts the store's commits.
type Stats struct {
	// Commits is the number of write transactions committed since Open;
	// each costs the disk two syncs (bbolt's data, then its meta page).
	Commits uint64 `json:"commits"`
	// Writes is the number of writes (admissions, each of one or more
	// commands of a scope; state changes; audit flushes) those commits
	// held: Writes/Commits writes share each commit's syncs.
	Writes uint64 `json:"writes"`
	// AuditDropped counts the audit entries of stale, duplicate and
	// rejected decisions dropped unwritten because AuditLimit of them
	// waited for a write (a flood the background flush could not keep up
	// with).
	AuditDropped uint64 `json:"audit_dropped"`
}

// Stats returns the store's commit counts.
func (l *Store) Stats() Stats {
	l.mu.Lock()
	dropped := l.dropped
	l.mu.Unlock()
	return Stats{Commits: l.commit.commits.Load(), Writes: l.commit.writes.Load(), AuditDropped: dropped}
}

// CommitRunning returns how long the store's commit in progress has been
// running; 0 if none is. A commit that runs for ever (a disk that stopped
// answering) shows here, for the service manager's watchdog.
func (l *Store) CommitRunning() time.Duration {
	if began := l.commit.running.Load(); began != 0 {
		return time.Since(epoch) - time.Duration(began-1)
	}
	return 0
}

// epoch is what commit times count from: the monotonic clock, which no
// step of the wall clock moves.
var epoch = time.Now()
