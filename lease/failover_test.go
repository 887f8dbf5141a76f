package lease_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/tests/testenv"
)

// revisionWatch reads the cluster's revision over and over, through every
// endpoint, until stop is called, and fails t if it ever goes backwards: a
// token is a revision, so a revision that went back could hand out a token
// below an earlier one.
func revisionWatch(t *testing.T, cli *clientv3.Client) (stop func() (reads int, last int64)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n int
	var last int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			rev, err := lease.Revision(rctx, cli)
			rcancel()
			if err != nil {
				continue // no quorum for a moment: a failover
			}
			if rev < last {
				t.Errorf("etcd's revision went back from %d to %d", last, rev)
			}
			last = rev
			n++
		}
	}()
	return func() (int, int64) { cancel(); wg.Wait(); return n, last }
}

func dialAll(t *testing.T, c *testenv.EtcdCluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestLeaseAcrossLeaderFailover: a three-member etcd cluster
// whose leader is killed (SIGKILL) while A holds the scope's lock and B
// waits for it, then again while A's lease runs out and B takes over, then
// while C acquires. A keeps its lease and its token across a failover
// (renewal goes to the new leader), B is granted only after A lets go and
// above A, C above B; the cluster's revision never goes back.
func TestLeaseAcrossLeaderFailover(t *testing.T) {
	c := testenv.StartEtcdCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw := testenv.ID(t, "gw")
	opts := lease.Options{Gateway: gw, Scope: "pump", TTL: 3}
	stopWatch := revisionWatch(t, dialAll(t, c))

	// A's TTL is well above a failover's length (up to 2.5 s measured on a
	// busy machine, plus the client's reconnection): a holder with a TTL
	// close to it loses its lease in a failover, as docs/controllers.md
	// says.
	cliA := dialAll(t, c)
	optsA := opts
	optsA.TTL = 6
	a, err := lease.Acquire(ctx, cliA, optsA)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		b, err := lease.Acquire(ctx, dialAll(t, c), opts)
		if err != nil {
			t.Errorf("B: %v", err)
		}
		got <- b
	}()
	waitKeys(t, ctx, dialAll(t, c), lease.Key(gw, "pump"), 2) // B waits: its key is there

	// Failover 1: A holds, B waits.
	killed, took := c.Failover(30 * time.Second)
	t.Logf("failover 1 (A holds, B waits): killed %s, new leader after %v", killed.Name, took)
	// A keeps its lease past its TTL (renewed through the new leader).
	time.Sleep(time.Duration(optsA.TTL+2) * time.Second)
	if held, err := a.Held(ctx); err != nil || !held {
		t.Fatalf("A after the failover and its TTL: Held = %v, %v; want true (its session renews through the new leader)", held, err)
	}
	select {
	case b := <-got:
		t.Fatalf("B was granted token %d while A (token %d) holds the lock", b.Token(), a.Token())
	default:
	}
	killed.Start()

	// Failover 2: A stops renewing (a pause, a partition) and the leader
	// dies while A's lease runs out.
	cliA.Close()
	killed, took = c.Failover(30 * time.Second)
	t.Logf("failover 2 (A's lease running out): killed %s, new leader after %v", killed.Name, took)
	var b *lease.Lease
	select {
	case b = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("B not granted within 30 s after A stopped renewing")
	}
	if b == nil {
		return
	}
	if b.Token() <= a.Token() {
		t.Errorf("B's token %d is not above A's %d", b.Token(), a.Token())
	}
	killed.Start()

	// Failover 3: while C acquires, after B lets go.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	killed, took = c.Failover(30 * time.Second)
	start := time.Now()
	l, err := lease.Acquire(ctx, dialAll(t, c), opts)
	if err != nil {
		t.Fatalf("C: acquire after the failover: %v", err)
	}
	t.Logf("failover 3 (C acquires): killed %s, new leader after %v, C granted %v after that", killed.Name, took, time.Since(start))
	defer l.Release(ctx)
	if l.Token() <= b.Token() {
		t.Errorf("C's token %d is not above B's %d", l.Token(), b.Token())
	}
	reads, last := stopWatch()
	t.Logf("tokens A %d, B %d, C %d; %d revision reads, never backwards, last %d", a.Token(), b.Token(), l.Token(), reads, last)
}

// waitKeys waits until at least n keys exist under prefix+"/".
func waitKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := keysAppear(wctx, cli, prefix, n); err != nil {
		t.Fatalf("after 30 s: %v", err)
	}
}

// TestAcquireWaitsAgainWhenItsSessionExpires: the lease of a waiter's key
// runs out while it waits (here revoked, as etcd does when renewals cannot
// reach it for longer than the TTL during a failover). Acquire queues
// again at once, in a new session (a new key appears while the holder
// still holds), and is granted once the holder lets go, with a token above
// the holder's; it does not fail with "session is expired".
func TestAcquireWaitsAgainWhenItsSessionExpires(t *testing.T) {
	url := testenv.Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := dial(t, url)
	gw := testenv.ID(t, "gw")
	opts := lease.Options{Gateway: gw, Scope: "pump", TTL: 5}
	a, err := lease.Acquire(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		l   *lease.Lease
		err error
	}
	got := make(chan grant, 1)
	waiter := dial(t, url)
	go func() {
		l, err := lease.Acquire(ctx, waiter, opts)
		got <- grant{l, err}
	}()
	waitKeys(t, ctx, cli, lease.Key(gw, "pump"), 2)
	resp, err := cli.Get(ctx, lease.Key(gw, "pump")+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var revoked []clientv3.LeaseID
	for _, kv := range resp.Kvs {
		if string(kv.Key) != a.Key() {
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				t.Fatal(err)
			}
			revoked = append(revoked, clientv3.LeaseID(kv.Lease))
		}
	}
	if len(revoked) != 1 {
		t.Fatalf("revoked %d waiters' leases, want 1 (keys %v)", len(revoked), resp.Kvs)
	}
	// The waiter's client has learned that its lease is gone: from here
	// on, its session is over, and only its own few etcd requests stand
	// between it and its new key.
	keepAliveEnds(t, ctx, waiter, revoked[0])
	// The waiter queues again while the holder still holds: a new key.
	// Returning instead, while the holder holds, is wrong whatever it
	// returns.
	seen := time.Now()
	grace, stop := context.WithTimeout(ctx, 2*time.Second)
	requeued := make(chan error, 1)
	go func() { requeued <- keysAppear(grace, cli, lease.Key(gw, "pump"), 2) }()
	select {
	case g := <-got:
		stop()
		t.Fatalf("the waiter whose lease ran out returned while the holder holds (%v, %v); want it to queue again behind a new key", g.l, g.err)
	case err := <-requeued:
		stop()
		if err != nil {
			t.Fatalf("no new key from the waiter within 2 s after its client saw its lease end: %v; want it to queue again at once", err)
		}
		t.Logf("the waiter queued again %v after its client saw its lease end", time.Since(seen))
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g.err != nil {
			t.Fatalf("the waiter whose lease ran out: %v; want it to wait again and be granted", g.err)
		}
		defer g.l.Release(ctx)
		if g.l.Token() <= a.Token() {
			t.Errorf("the waiter's token %d is not above the holder's %d", g.l.Token(), a.Token())
		}
	case <-ctx.Done():
		t.Fatal("the waiter was not granted within 60 s after the holder let go")
	}
}

// keepAliveEnds waits until cli's keep-alive of lease id ends, as it does
// when etcd answers that the lease is gone. cli multiplexes the keep-alives
// of one lease: this one ends when a session's on the same client does.
func keepAliveEnds(t *testing.T, ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := cli.KeepAlive(kctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	if kctx.Err() != nil {
		t.Fatalf("the keep-alive of lease %x did not end within 30 s of its revocation", id)
	}
}

// keysAppear waits until at least n keys exist under prefix+"/", or ctx
// ends.
func keysAppear(ctx context.Context, cli *clientv3.Client, prefix string, n int64) error {
	for {
		resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fewer than %d keys under %s/ (%v, %v)", n, prefix, resp, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
