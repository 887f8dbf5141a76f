package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldUntil is a lease's local deadline: the send time of the last
// keep-alive that etcd answered, plus the TTL etcd gave in that answer.
// etcd renewed the lease when the keep-alive reached it, after it was
// sent, so etcd cannot let the lease expire before then; the holder's own
// clock, which runs as fast as etcd's but may pause (GC, swap, SIGSTOP),
// tells whether that moment has passed. The etcd client's own keep-alive
// counts from the answer instead, which is later by a round trip, and a
// pause or a slow answer can make that round trip as long as the TTL.
type heldUntil struct {
	scope string
	token uint64

	mu       sync.Mutex
	at       time.Time
	ttl      time.Duration
	why      string // why the lease is lost, once it is
	lastErr  string // the last keep-alive's error, if it failed
	released bool
	lost     chan struct{} // closed when the lease is lost or released
}

// keepAlive renews a lease once and returns the TTL etcd answered, or
// errGone if etcd says the lease no longer exists.
type keepAlive func(ctx context.Context) (time.Duration, error)

var errGone = errors.New("etcd says the lease is gone (expired or revoked)")

// keepAliveOnce is the keepAlive of lease id in cli.
func keepAliveOnce(cli *clientv3.Client, id clientv3.LeaseID) keepAlive {
	return func(ctx context.Context) (time.Duration, error) {
		r, err := cli.KeepAliveOnce(ctx, id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && r.TTL <= 0) {
			return 0, errGone
		}
		if err != nil {
			return 0, err
		}
		return time.Duration(r.TTL) * time.Second, nil
	}
}

// track keeps d's deadline: a keep-alive every TTL/3 (as the etcd
// client's), each moving the deadline to its send time plus the TTL etcd
// answered, until ctx ends or the lease is lost. done is the etcd
// session's end: etcd's own keep-alive gave up or the lease was revoked.
func (d *heldUntil) track(ctx context.Context, renew keepAlive, done <-chan struct{}) {
	every := max(d.ttl/3, 200*time.Millisecond)
	next := time.Now().Add(every)
	for {
		d.mu.Lock()
		at := d.at
		d.mu.Unlock()
		wake := time.NewTimer(time.Until(earliest(next, at)))
		select {
		case <-ctx.Done():
			wake.Stop()
			return
		case <-done:
			wake.Stop()
			d.lose("its etcd session ended: the lease expired or was revoked, or the etcd client was closed")
			return
		case <-d.lost:
			wake.Stop()
			return
		case <-wake.C:
		}
		if d.expired() {
			return
		}
		if time.Now().Before(next) {
			continue
		}
		sent := time.Now()
		kctx, cancel := context.WithDeadline(ctx, at)
		ttl, err := renew(kctx)
		cancel()
		switch {
		case errors.Is(err, errGone):
			d.lose(errGone.Error())
			return
		case err != nil:
			d.mu.Lock()
			d.lastErr = err.Error()
			d.mu.Unlock()
			next = time.Now().Add(min(every, 500*time.Millisecond)) // the deadline is near: try again soon
		default:
			d.extend(sent, ttl)
			next = time.Now().Add(every)
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// extend moves the deadline to sent+ttl, for a keep-alive sent at sent
// and answered with ttl; an answer that comes after the deadline is too
// late: the lease may have expired in between, and a holder that paused
// meanwhile must not take it as held again.
func (d *heldUntil) extend(sent time.Time, ttl time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why == "" && time.Now().Before(d.at) && sent.Add(ttl).After(d.at) {
		d.at = sent.Add(ttl)
		d.lastErr = ""
	}
}

// expired marks the lease lost if its deadline has passed, and reports
// whether it is lost.
func (d *heldUntil) expired() bool {
	d.mu.Lock()
	var why string
	if !time.Now().Before(d.at) {
		why = "etcd answered no keep-alive sent within the last " + d.ttl.String()
		if d.lastErr != "" {
			why += ": " + d.lastErr
		}
	}
	d.mu.Unlock()
	if why != "" {
		d.lose(why)
	}
	select {
	case <-d.lost:
		return true
	default:
		return false
	}
}

// lose marks the lease lost for the reason why, once.
func (d *heldUntil) lose(why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why != "" {
		return
	}
	d.why = why
	close(d.lost)
}

// release marks the lease released: from then on it is not held.
func (d *heldUntil) release() {
	d.mu.Lock()
	d.released = true
	d.mu.Unlock()
	d.lose("released")
}

// check returns nil while the lease is held: not released, not lost, and
// its deadline not passed; otherwise a *LostError.
func (d *heldUntil) check() error {
	d.expired()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.released {
		return &LostError{Scope: d.scope, Token: d.token, Why: "released"}
	}
	if d.why != "" {
		return &LostError{Scope: d.scope, Token: d.token, Why: d.why}
	}
	return nil
}

// LostError is Lease.Check's error: the lease is lost or released, and
// nothing may be sent under its token. errors.Is(err, ErrLost) holds.
type LostError struct {
	Scope string
	Token uint64
	Why   string // "released", or why it was lost
}

func (e *LostError) Error() string {
	if e.Why == "released" {
		return fmt.Sprintf("lease: the lease of scope %s (token %d) was released: nothing may be sent under its token", e.Scope, e.Token)
	}
	return fmt.Sprintf("lease: the lease of scope %s (token %d) is lost (%s): nothing may be sent under its token; acquire the scope again",
		e.Scope, e.Token, e.Why)
}

// Is makes errors.Is(err, ErrLost) hold for a *LostError.
func (e *LostError) Is(target error) bool { return target == ErrLost }
