// Package lease obtains fencing tokens from etcd: a controller locks one
// key per fence scope, and the token is the lock key's CreateRevision.
//
// # Why CreateRevision
//
// An etcd revision is a cluster-wide counter that increases with every
// change and never goes back in the lifetime of a cluster. Each lock
// acquisition creates a new key under the scope's prefix, so its
// CreateRevision is higher than that of every key created before it, and in
// particular than every earlier holder's token. Keeping the lease alive
// (renewal) keeps the key and so the token; losing the lease deletes the
// key, and acquiring again creates a new key with a higher revision.
//
// The lease ID, the key's name or a UUID are not tokens: none of them is
// ordered, so the gateway could not tell an old holder from a new one.
//
// # Pitfalls guarded against
//
//   - A lock call may return after the session's lease already expired
//     (while it waited, or in older clients, reporting success with a key
//     that is gone). Acquire therefore reads its own key back after the lock
//     returns and checks that it still exists, belongs to this session's
//     lease, and that the session is alive; otherwise it fails with
//     ErrLost.
//   - A waiter's own lease can run out before the lock comes to it, when
//     etcd is out of reach for longer than the TTL (a leader failover
//     with a short TTL). Acquire then queues again at once, in a new
//     session behind a new key, so a failover delays a grant but does not
//     fail it, nor leave the waiter out of the queue.
//   - A holder must stop acting when its lease is lost: Lost is closed
//     then. The gateway's fence protects the actuators even if it does not,
//     since the next holder's token is higher.
//
// # Restoring etcd from a backup
//
// Restoring a cluster from a snapshot rewinds revisions to the snapshot's.
// New locks would then get tokens below the fences the gateway already
// recorded, and the gateway would refuse every command as stale: safe, but
// unavailable. Restore with `etcdutl snapshot restore --bump-revision N
// --mark-compacted`, with N above the number of revisions that may have been
// lost, so that revisions continue above every token ever handed out. See
// docs/controllers.md.
package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Prefix is the key prefix of fencegate's locks; the lock of a scope is
// Prefix + gateway + "/" + scope.
const Prefix = "/fencegate/locks/"

// ErrLost is returned by Acquire when the lock was obtained but the
// session's lease is already gone.
var ErrLost = errors.New("lease: lock obtained after the lease was lost")

// Options configure Acquire.
type Options struct {
	// TTL is the lease's time to live in seconds; zero means 10. etcd
	// enforces a minimum (a few seconds with default settings).
	TTL int
	// Wait, if positive, bounds Acquire's wait, for etcd's grant and for
	// a lock another holds together: Acquire then gives up with an error
	// that wraps context.DeadlineExceeded. The lease itself lives as long
	// as Acquire's context.
	Wait time.Duration
	// Gateway and Scope name the lock: one per gateway and fence scope.
	// Scope is the actuator's fence scope as the gateway publishes it
	// (client.Client.Scope), never the actuator's name: actuators that
	// share a scope share one fence, so they must share one lease.
	Gateway, Scope string
}

// Lease is a held lock and its fencing token.
type Lease struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
	token   uint64
	key     string
	held    *heldUntil
}

// Key returns the name of the lock of a gateway's scope.
func Key(gateway, scope string) string { return Prefix + gateway + "/" + scope }

// Acquire waits for the scope's lock and returns it with its token.
func Acquire(ctx context.Context, cli *clientv3.Client, o Options) (*Lease, error) {
	if o.Gateway == "" || o.Scope == "" || strings.Contains(o.Gateway+o.Scope, "/") {
		return nil, fmt.Errorf("lease: gateway %q and scope %q must be non-empty and contain no /", o.Gateway, o.Scope)
	}
	if o.TTL == 0 {
		o.TTL = 10
	}
	var (
		s *concurrency.Session
		m *concurrency.Mutex
	)
	deadline := time.Now().Add(o.Wait) // with Wait: for the grant and the lock together
	for {
		var err error
		sopts := []concurrency.SessionOption{concurrency.WithTTL(o.TTL), concurrency.WithContext(ctx)}
		if o.Wait > 0 {
			// The grant is bounded by Wait too (an etcd out of reach);
			// the session's keep-alive lives on ctx.
			gctx, cancel := context.WithDeadline(ctx, deadline)
			g, gerr := cli.Grant(gctx, int64(o.TTL))
			err = gerr
			timedOut := errors.Is(gctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
			cancel()
			if err != nil {
				if timedOut {
					return nil, fmt.Errorf("lease: grant: no answer from etcd within %v: %w", o.Wait, context.DeadlineExceeded)
				}
				return nil, fmt.Errorf("lease: grant: %w", err)
			}
			sopts = append(sopts, concurrency.WithLease(g.ID))
		}
		s, err = concurrency.NewSession(cli, sopts...)
		if err != nil {
			return nil, fmt.Errorf("lease: session: %w", err)
		}
		m = concurrency.NewMutex(s, Key(o.Gateway, o.Scope))
		// Stop waiting as soon as the session ends: its key is gone (or
		// going), and waiting on would keep us out of the queue.
		var (
			lctx context.Context
			stop context.CancelFunc
		)
		if o.Wait > 0 {
			lctx, stop = context.WithDeadline(ctx, deadline)
		} else {
			lctx, stop = context.WithCancel(ctx)
		}
		go func() {
			select {
			case <-s.Done():
				stop()
			case <-lctx.Done():
			}
		}()
		err = m.Lock(lctx)
		waited := errors.Is(lctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil // the wait's bound, not the caller's
		stop()
		if err == nil {
			break
		}
		abandon(ctx, s)
		if waited {
			return nil, fmt.Errorf("lease: lock %s: held by another for %v: %w", Key(o.Gateway, o.Scope), o.Wait, context.DeadlineExceeded)
		}
		expired := errors.Is(err, concurrency.ErrSessionExpired)
		select {
		case <-s.Done():
			expired = true
		default:
		}
		if expired && ctx.Err() == nil {
			// The lease of our waiting key ran out before the lock came
			// to us (etcd was out of reach for longer than the TTL, as
			// in a leader failover). Nothing was granted: wait again in
			// a new session, behind a new key.
			continue
		}
		return nil, fmt.Errorf("lease: lock %s: %w", Key(o.Gateway, o.Scope), err)
	}
	// Read the key back: it must exist, belong to our lease, and the
	// session must be alive. Its CreateRevision is the token.
	resp, err := cli.Get(ctx, m.Key())
	if err != nil {
		m.Unlock(context.Background())
		abandon(ctx, s)
		return nil, fmt.Errorf("lease: read lock key: %w", err)
	}
	select {
	case <-s.Done():
		abandon(ctx, s)
		return nil, ErrLost
	default:
	}
	if len(resp.Kvs) == 0 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.Lease() {
		abandon(ctx, s)
		return nil, ErrLost
	}
	rev := resp.Kvs[0].CreateRevision
	if rev <= 0 {
		abandon(ctx, s)
		return nil, fmt.Errorf("lease: lock key has revision %d", rev)
	}
	// One keep-alive now, for the deadline's start: the send time of a
	// keep-alive etcd answered (the lock may have taken longer than the
	// TTL, the session renewing the lease meanwhile).
	renew := keepAliveOnce(cli, s.Lease())
	sent := time.Now()
	ttl, err := renew(ctx)
	if err != nil {
		abandon(ctx, s) // revoking the lease deletes the lock key
		if errors.Is(err, errGone) {
			return nil, ErrLost
		}
		return nil, fmt.Errorf("lease: keep-alive: %w", err)
	}
	d := &heldUntil{scope: o.Scope, token: uint64(rev), at: sent.Add(ttl), ttl: ttl, lost: make(chan struct{})}
	go d.track(ctx, renew, s.Done())
	return &Lease{session: s, mutex: m, token: uint64(rev), key: m.Key(), held: d}, nil
}

// Token returns the fencing token: the lock key's CreateRevision.
func (l *Lease) Token() uint64 { return l.token }

// Key returns this holder's lock key.
func (l *Lease) Key() string { return l.key }

// Lost is closed when the lease is lost (its deadline passed, or etcd
// expired or revoked it) or released; from then on the holder must not
// act, and a new Acquire gets a higher token. The deadline is the send
// time of the last keep-alive etcd answered plus the TTL: etcd may let
// the lease expire then.
func (l *Lease) Lost() <-chan struct{} { return l.held.lost }

// Check returns nil while the lease is held, by the holder's own clock:
// neither released nor lost, and its deadline not passed. Otherwise a
// *LostError that says why. Check it just before acting: a holder that
// paused after an earlier check cannot know that its lease ran out
// meanwhile (client.Client.SendUnder checks it before every publish).
func (l *Lease) Check() error { return l.held.check() }

// Deadline returns the time until which the lease is held, unless a
// keep-alive moves it on: the send time of the last keep-alive etcd
// answered plus the TTL.
func (l *Lease) Deadline() time.Time {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	return l.held.at
}

// Held reports whether the lock key still exists under this lease, asking
// etcd (a linearizable read).
func (l *Lease) Held(ctx context.Context) (bool, error) {
	resp, err := l.session.Client().Txn(ctx).If(l.mutex.IsOwner()).Commit()
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	return resp.Succeeded, nil
}

// Release unlocks and revokes the lease, within five seconds, even when
// ctx (or Acquire's context) has ended: a holder that stops because its
// context was cancelled (defer l.Release(ctx)) still lets go at once,
// rather than leave its lock and lease to expire.
func (l *Lease) Release(ctx context.Context) error {
	l.held.release()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := l.mutex.Unlock(ctx)
	if rerr := revoke(ctx, l.session); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("lease: release: %w", err)
	}
	return nil
}

// revoke ends session s: it stops the keep-alive and revokes the lease
// under ctx. concurrency.Session.Close would revoke under the session's
// own context, the one given to Acquire, which has often ended by then:
// the revoke then fails ("context canceled", which the etcd client logs
// as a warning) and the lease lingers until its TTL runs out. A lease
// that is already gone (expired) is no error.
func revoke(ctx context.Context, s *concurrency.Session) error {
	s.Orphan()
	_, err := s.Client().Revoke(ctx, s.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// abandon ends session s after a failed Acquire, whose context may have
// ended: see revoke.
func abandon(ctx context.Context, s *concurrency.Session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	revoke(ctx, s)
}

// AheadError is CheckFence's error: the gateway's fence was not raised by
// a holder of this etcd, so no token this etcd grants can pass it until
// its revision does.
type AheadError struct {
	Fence    uint64 // the gateway's fence token
	Revision int64  // the cluster's current revision
	// Held, if not zero, is the token of a lock this holder still holds
	// at or below the fence: nobody can have been granted a newer one.
	Held uint64
}

func (e *AheadError) Error() string {
	what := fmt.Sprintf("is above every revision this etcd has issued (its current revision is %d)", e.Revision)
	if e.Held != 0 && uint64(e.Revision) >= e.Fence {
		what = fmt.Sprintf("is at or above the token %d that this etcd has just granted to the lock this holder still holds, so no newer holder of this etcd raised it "+
			"(this etcd handed out token %d again)", e.Held, e.Held)
	}
	return fmt.Sprintf("lease: the gateway's fence token %d %s: the fence's tokens did not come from this etcd: "+
		"they were typed by hand (gateway send --token N), or came from another lease service, or etcd was reset or restored from an older backup. "+
		"No token from this etcd can pass the fence until its revision does; retrying will not help. "+
		"Tokens typed by hand: go on typing them, above the fence, and take a scope's tokens from one source only. "+
		"An etcd restored from a backup: restore it again with etcdutl snapshot restore --bump-revision (see docs/controllers.md, \"Restoring etcd\")",
		e.Fence, what)
}

// CheckFence returns an *AheadError if fence (a gateway's fence token, as
// a stale answer reports it) is above the cluster's current revision:
// then the gateway's fence was not raised by a newer holder of this etcd,
// and acquiring the lease again cannot produce a token that passes it.
// It returns nil when fence is within the revisions etcd has issued.
// A holder that still holds its lease should use Lease.CheckFence, which
// also catches a fence that a restored etcd's reissued tokens reach.
func CheckFence(ctx context.Context, cli *clientv3.Client, fence uint64) error {
	rev, err := Revision(ctx, cli)
	if err != nil {
		return err
	}
	if fence > uint64(rev) {
		return &AheadError{Fence: fence, Revision: rev}
	}
	return nil
}

// CheckFence is the package's CheckFence for a stale answer to a command
// under this lease's token, before the lease is released. It also returns
// an *AheadError if the fence is at or above this token while the lock is
// still held: no holder of this etcd can have been granted a newer token
// meanwhile, so the fence came from elsewhere; after a restore from a
// backup without --bump-revision, etcd grants the tokens it had handed out
// before again, and the first of them lands on the fence, not above it.
// It is nil when the lock is lost: a newer holder raised the fence. (The
// holder's own commands under its token must rise in seq, as the protocol
// asks; a fence that its own later command raised is not told apart.)
func (l *Lease) CheckFence(ctx context.Context, fence uint64) error {
	cli := l.session.Client()
	if err := CheckFence(ctx, cli, fence); err != nil || fence < l.token {
		return err
	}
	held, err := l.Held(ctx)
	if err != nil || !held {
		return err
	}
	rev, err := Revision(ctx, cli)
	if err != nil {
		return err
	}
	return &AheadError{Fence: fence, Revision: rev, Held: l.token}
}

// Revision returns the cluster's current revision: every token this etcd
// ever issued (a lock key's CreateRevision) is at or below it. It is the
// floor of a gateway's new store when the old one was lost (gateway init
// --floor-from-etcd).
func Revision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, Prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("lease: read etcd's revision: %w", err)
	}
	return resp.Header.Revision, nil
}
