package fencelog

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fencegate/fencegate/fence"
)

// holdCommits makes each of the next k commits wait, after its
// transaction committed and before its writers learn it, until release is
// called. held receives the size of every batch.
func holdCommits(t *testing.T, k int) (held <-chan int, release func()) {
	t.Helper()
	h := make(chan int, 100)
	r := make(chan struct{}, k)
	testHookCommitted = func(n int) {
		h <- n
		if k > 0 {
			k--
			<-r
		}
	}
	t.Cleanup(func() { testHookCommitted = nil })
	return h, func() { r <- struct{}{} }
}

// queued waits until n writes wait for the next commit.
func queued(t *testing.T, l *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.commit.mu.Lock()
		got := len(l.commit.queue)
		l.commit.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", got, n)
		}
	}
}

// Commands of many scopes that arrive while a commit is in progress share
// the next one: one transaction, one pair of syncs.
func TestGroupCommit(t *testing.T) {
	l, _ := openLog(t, nil)
	held, release := holdCommits(t, 1)
	type result struct {
		adm Admission
		err error
	}
	results := make(chan result, 20)
	go func() {
		adm, err := l.Admit("s0", cmd("first", "a0", 1, 0, fence.StateOn), fence.Rules{}, nil)
		results <- result{adm, err}
	}()
	if n := <-held; n != 1 {
		t.Fatalf("first batch of %d writes, want 1", n)
	}
	const others = 15
	for i := 1; i <= others; i++ {
		go func() {
			adm, err := l.Admit(fmt.Sprint("s", i), cmd(fmt.Sprint("c", i), fmt.Sprint("a", i), 1, 0, fence.StateOn), fence.Rules{}, nil)
			results <- result{adm, err}
		}()
	}
	queued(t, l, others)
	before := l.Stats()
	release()
	if n := <-held; n != others {
		t.Fatalf("the writes that waited were committed %d at a time, want all %d in one commit", n, others)
	}
	for range others + 1 {
		r := <-results
		if r.err != nil || r.adm.Outcome != fence.Applied {
			t.Fatalf("Admit = %+v, %v; want applied", r.adm, r.err)
		}
	}
	if after := l.Stats(); after.Commits != before.Commits+1 || after.Writes != before.Writes+others {
		t.Errorf("stats went from %+v to %+v; want one commit of %d writes", before, after, others)
	}
	fences, err := l.Fences()
	if err != nil {
		t.Fatal(err)
	}
	if len(fences) != others+1 {
		t.Errorf("%d scopes recorded, want %d: %v", len(fences), others+1, fences)
	}
}

// No write returns before the commit that holds it did: an output is
// driven only after its fence is on disk, whatever batch it was in. The
// batch's first writer commits it; the test watches the second.
func TestNoWriteReturnsBeforeItsCommit(t *testing.T) {
	l, _ := openLog(t, nil)
	held, release := holdCommits(t, 2)
	admitted := func(scope string) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := l.Admit(scope, cmd(scope, scope, 1, 0, fence.StateOn), fence.Rules{}, nil)
			ch <- err
		}()
		return ch
	}
	first := admitted("first")
	<-held
	leader := admitted("leader")
	queued(t, l, 1)
	follower := admitted("follower")
	queued(t, l, 2)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := <-held; n != 2 {
		t.Fatalf("a batch of %d writes, want 2", n)
	}
	// Committed, and held: neither writer may know yet.
	select {
	case <-follower:
		t.Fatal("Admit returned before the commit that holds its fence was done")
	case <-leader:
		t.Fatal("the batch's leader returned before its commit was done")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	for _, ch := range []<-chan error{leader, follower} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// A write that fails in a batch fails alone: the others of its batch are
// committed without it.
func TestFailedWriteFailsAlone(t *testing.T) {
	l, _ := openLog(t, nil)
	held, release := holdCommits(t, 1)
	first := make(chan error, 1)
	go func() {
		_, err := l.Admit("s0", cmd("first", "a0", 1, 0, fence.StateOn), fence.Rules{}, nil)
		first <- err
	}()
	<-held
	good := make(chan error, 1)
	bad := make(chan error, 1)
	go func() {
		good <- l.update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketScopes).Put([]byte("good"), []byte(`{"fence":{"token":5}}`))
		})
	}()
	queued(t, l, 1)
	go func() { bad <- l.update(func(*bolt.Tx) error { return fmt.Errorf("this write fails") }) }()
	queued(t, l, 2)
	release()
	if err := <-bad; err == nil {
		t.Error("the failing write succeeded")
	}
	if err := <-good; err != nil {
		t.Errorf("a write batched with a failing one failed: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	f, err := l.Fences()
	if err != nil {
		t.Fatal(err)
	}
	if f["good"].Token != 5 {
		t.Errorf("the good write of the batch was not committed: fences %v", f)
	}
}

// Two commands of one scope in one batch: the second is decided on the
// record as the first left it in the transaction, not as the last commit
// left it (the scope lock of package actuator keeps them apart; the store
// must not rely on it).
func TestBatchSeesItsOwnWrites(t *testing.T) {
	l, _ := openLog(t, nil)
	held, release := holdCommits(t, 1)
	first := make(chan error, 1)
	go func() {
		_, err := l.Admit("s", cmd("first", "a", 1, 0, fence.StateOn), fence.Rules{}, nil)
		first <- err
	}()
	<-held
	type result struct {
		adm Admission
		err error
	}
	admitted := func(c fence.Command) <-chan result {
		ch := make(chan result, 1)
		go func() {
			adm, err := l.Admit("s", c, fence.Rules{}, nil)
			ch <- result{adm, err}
		}()
		return ch
	}
	newer := admitted(cmd("newer", "a", 5, 2, fence.StateOn))
	queued(t, l, 1)
	older := admitted(cmd("older", "a", 5, 1, fence.StateOff))
	queued(t, l, 2)
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-newer; r.err != nil || r.adm.Outcome != fence.Applied {
		t.Fatalf("5/2: %+v, %v; want applied", r.adm, r.err)
	}
	if r := <-older; r.err != nil || r.adm.Outcome != fence.Stale {
		t.Fatalf("5/1 after 5/2 in the same batch: %+v, %v; want stale", r.adm, r.err)
	}
	if f, _ := l.Fences(); f["s"] != (fence.Fence{Token: 5, Seq: 2}) {
		t.Errorf("fence %v, want 5/2", f["s"])
	}
}
