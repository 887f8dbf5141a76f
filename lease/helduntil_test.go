package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a keepAlive that plays etcd: answer decides each call's
// outcome from its number (from 0); sent records when each was called.
type scripted struct {
	mu     sync.Mutex
	sent   []time.Time
	answer func(n int, ctx context.Context) (time.Duration, error)
}

func (s *scripted) renew(ctx context.Context) (time.Duration, error) {
	s.mu.Lock()
	n := len(s.sent)
	s.sent = append(s.sent, time.Now())
	s.mu.Unlock()
	return s.answer(n, ctx)
}

func (s *scripted) first() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[0]
}

// unanswered is a keep-alive that gets no answer: it times out.
func unanswered(ctx context.Context) (time.Duration, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func tracked(t *testing.T, ttl time.Duration, s *scripted) *heldUntil {
	t.Helper()
	d := &heldUntil{scope: "pump", token: 41, at: time.Now().Add(ttl), ttl: ttl, lost: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go d.track(ctx, s.renew, nil)
	return d
}

func lostWithin(t *testing.T, d *heldUntil, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-d.lost:
		return time.Now()
	case <-time.After(within):
		t.Fatalf("the lease was not lost within %v", within)
		return time.Time{}
	}
}

// The deadline is the send time of the last keep-alive etcd answered
// plus the TTL: etcd renewed the lease when the keep-alive reached it,
// not when its answer came back (0.4 s later here).
func TestDeadlineFromTheLastAnsweredKeepAliveSent(t *testing.T) {
	s := &scripted{answer: func(n int, ctx context.Context) (time.Duration, error) {
		if n > 0 {
			return unanswered(ctx)
		}
		time.Sleep(400 * time.Millisecond) // a slow answer
		return time.Second, nil
	}}
	d := tracked(t, time.Second, s)
	gone := lostWithin(t, d, 5*time.Second)
	d.mu.Lock()
	at := d.at
	d.mu.Unlock()
	// Read from the record, exact: a busy machine cannot make it flaky.
	if want := s.first().Add(time.Second); at.After(want) || at.Before(want.Add(-100*time.Millisecond)) {
		t.Errorf("deadline %v after the first keep-alive's send time; want its send time plus the TTL (%v)", at.Sub(s.first()), time.Second)
	}
	if gone.Before(at) {
		t.Errorf("lost %v before the deadline", at.Sub(gone))
	}
	err := d.check()
	var le *LostError
	if !errors.As(err, &le) || !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "no keep-alive sent within the last 1s") {
		t.Fatalf("check() = %v; want a *LostError that says no keep-alive was answered", err)
	}
}

// An answer that comes after the deadline does not make the lease held
// again: etcd may have let it expire in between, and a holder that paused
// meanwhile must stay out.
func TestAnswerAfterTheDeadlineDoesNotCount(t *testing.T) {
	s := &scripted{answer: func(n int, ctx context.Context) (time.Duration, error) {
		if n > 0 {
			return unanswered(ctx)
		}
		time.Sleep(1200 * time.Millisecond) // past the 1 s deadline, ignoring ctx
		return 10 * time.Second, nil
	}}
	d := tracked(t, time.Second, s)
	lostWithin(t, d, 5*time.Second)
	time.Sleep(time.Second) // the late answer has come
	if err := d.check(); err == nil {
		t.Fatal("check() = nil after a keep-alive answered after the deadline; want the lease lost")
	}
}

// The deadline alone decides, whether or not the tracker has woken: a
// holder that checks after a pause longer than the TTL finds the lease
// lost at once.
func TestCheckReadsTheClock(t *testing.T) {
	d := &heldUntil{scope: "pump", token: 41, at: time.Now().Add(50 * time.Millisecond), ttl: time.Second, lost: make(chan struct{})}
	if err := d.check(); err != nil {
		t.Fatalf("check() before the deadline = %v", err)
	}
	time.Sleep(60 * time.Millisecond) // no tracker runs
	if err := d.check(); !errors.Is(err, ErrLost) {
		t.Fatalf("check() after the deadline = %v; want ErrLost", err)
	}
	select {
	case <-d.lost:
	default:
		t.Fatal("lost is not closed after check found the deadline passed")
	}
}

func TestGoneAndReleased(t *testing.T) {
	s := &scripted{answer: func(int, context.Context) (time.Duration, error) { return 0, errGone }}
	d := tracked(t, 10*time.Second, s)
	lostWithin(t, d, 10*time.Second) // the first keep-alive, after 3.3 s
	if err := d.check(); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("check() = %v; want lost, etcd says gone", err)
	}
	r := &heldUntil{scope: "pump", token: 41, at: time.Now().Add(time.Hour), ttl: time.Hour, lost: make(chan struct{})}
	r.release()
	if err := r.check(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "released") {
		t.Fatalf("check() after release = %v; want released", err)
	}
}
