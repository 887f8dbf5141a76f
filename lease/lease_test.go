package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

func dial(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestTokenIsCreateRevision(t *testing.T) {
	url := testenv.Etcd(t)
	cli := dial(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// TTL 3: renewals every second, so a busy machine (another suite on
	// it) does not lose the lease for a stall of two seconds.
	l, err := lease.Acquire(ctx, cli, lease.Options{Gateway: testenv.ID(t, "gw"), Scope: "pump", TTL: 3})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, l.Key())
	if err != nil || len(resp.Kvs) != 1 || uint64(resp.Kvs[0].CreateRevision) != l.Token() {
		t.Fatalf("token %d, lock key %v: want the key's CreateRevision", l.Token(), resp)
	}
	// Renewal keeps the token: hold the lease for more than twice its TTL.
	time.Sleep(7 * time.Second)
	if held, err := l.Held(ctx); err != nil || !held {
		t.Fatalf("Held after 7 s with a 3 s TTL = %v, %v; want true (the session renews)", held, err)
	}
	resp, _ = cli.Get(ctx, l.Key())
	if len(resp.Kvs) != 1 || uint64(resp.Kvs[0].CreateRevision) != l.Token() {
		t.Errorf("after renewal the lock key is %v, want the same key with revision %d", resp.Kvs, l.Token())
	}
	// Writes elsewhere move the revision on; a new holder is above all of them.
	for range 3 {
		cli.Put(ctx, "/other", "x")
	}
	first := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := lease.Acquire(ctx, cli, lease.Options{Gateway: testenv.ID(t, "gw"), Scope: "pump", TTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if l2.Token() <= first+3 {
		t.Errorf("token after reacquisition = %d, want above %d (the first token plus three writes)", l2.Token(), first+3)
	}
}

// A holder whose process stops renewing (a pause) loses the lease; the lock
// then passes to a waiting holder with a higher token.
func TestLostLeasePassesToHigherToken(t *testing.T) {
	url := testenv.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cliA := dial(t, url)
	gw := testenv.ID(t, "gw")
	a, err := lease.Acquire(ctx, cliA, lease.Options{Gateway: gw, Scope: "pump", TTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		b, err := lease.Acquire(ctx, dial(t, url), lease.Options{Gateway: gw, Scope: "pump", TTL: 2})
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("B acquired while A held the lock")
	case <-time.After(time.Second):
	}
	cliA.Close() // A stops renewing, as a paused or partitioned process does
	var b *lease.Lease
	select {
	case b = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("B did not get the lock after A's lease expired")
	}
	if b == nil {
		return
	}
	defer b.Release(ctx)
	if b.Token() <= a.Token() {
		t.Errorf("B's token %d is not above A's %d", b.Token(), a.Token())
	}
	if held, _ := b.Held(ctx); !held {
		t.Error("B does not hold the lock")
	}
}

func TestAcquireRejectsBadNames(t *testing.T) {
	for _, o := range []lease.Options{{Gateway: "", Scope: "x"}, {Gateway: "g", Scope: ""}, {Gateway: "g", Scope: "a/b"}} {
		if _, err := lease.Acquire(context.Background(), nil, o); err == nil {
			t.Errorf("Acquire(%+v) succeeded", o)
		}
	}
}

// Options.Wait bounds the wait for a lock another holds, and only the
// wait: a lease acquired with it lives as long as Acquire's context, long
// after the wait's bound.
func TestWaitBoundsTheWaitOnly(t *testing.T) {
	url := testenv.Etcd(t)
	cli := dial(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := lease.Options{Gateway: testenv.ID(t, "gw"), Scope: "pump", TTL: 3, Wait: 300 * time.Millisecond}
	first, err := lease.Acquire(ctx, cli, o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // three times the wait's bound
	select {
	case <-first.Lost():
		t.Fatal("the lease was lost when the wait's bound passed")
	default:
	}
	start := time.Now()
	if _, err := lease.Acquire(ctx, cli, o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while another holds the lock: %v; want it to give up with context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v, want about 300ms", d)
	}
	if held, err := first.Held(ctx); err != nil || !held {
		t.Errorf("the first lease: held %v, %v", held, err)
	}
}

// Options.Wait bounds the wait for etcd's grant too: with etcd out of
// reach, Acquire gives up after Wait instead of waiting for ever.
func TestWaitBoundsAnUnreachableEtcd(t *testing.T) {
	cli := dial(t, fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))) // nothing listens there
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err := lease.Acquire(ctx, cli, lease.Options{Gateway: "gw", Scope: "pump", TTL: 3, Wait: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Acquire with etcd out of reach: %v (after %v); want it to give up with context.DeadlineExceeded after 1s", err, time.Since(start))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v, want about 1s", d)
	}
}

// A holder that stops because its context ended, and releases under that
// context (defer l.Release(ctx)), still unlocks and revokes its lease: no
// lease is left in etcd.
func TestReleaseAfterContextEnded(t *testing.T) {
	url := testenv.Etcd(t)
	cli := dial(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	l, err := lease.Acquire(ctx, cli, lease.Options{Gateway: testenv.ID(t, "gw"), Scope: "pump", TTL: 30})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after the context ended: %v", err)
	}
	check, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	leases, err := cli.Leases(check)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 {
		t.Errorf("%d leases left after Release, want none", len(leases.Leases))
	}
	if resp, err := cli.Get(check, l.Key()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("lock key %s after Release: %v, %v; want it gone", l.Key(), resp, err)
	}
}

// A holder cut off from etcd (here its client closed, as a partition or a
// pause does) finds its lease lost by its own clock, at the send time of
// the last keep-alive etcd answered plus the TTL: Check fails and Lost is
// closed, though no word from etcd said so.
func TestLostByTheHoldersClock(t *testing.T) {
	url := testenv.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lease.Acquire(ctx, cli, lease.Options{Gateway: testenv.ID(t, "gw"), Scope: "pump", TTL: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("Check() right after Acquire = %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // a keep-alive or two
	if err := l.Check(); err != nil {
		t.Fatalf("Check() after 1.5 s of a 3 s lease = %v; want held (keep-alives move the deadline)", err)
	}
	cut := time.Now()
	cli.Close()
	if d := l.Deadline(); d.After(cut.Add(3 * time.Second)) {
		t.Fatalf("deadline %v after the cut; want at most the TTL (3 s): every answered keep-alive was sent before it", d.Sub(cut))
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost was not closed 10 s after etcd was cut off a 3 s lease")
	}
	err = l.Check()
	var le *lease.LostError
	if !errors.As(err, &le) || !errors.Is(err, lease.ErrLost) || le.Token != l.Token() || le.Scope != "pump" {
		t.Fatalf("Check() after the cut = %v; want a *lease.LostError for scope pump, token %d", err, l.Token())
	}
	t.Log(err)
}
