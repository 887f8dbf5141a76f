package mqttlink

import (
	"context"
	"testing"
	"time"
)

// testLink is a link run by startLink.
type testLink struct {
	*Link
	cancel context.CancelFunc
	done   chan error
}

// startLink runs a link with o (o.Ready is set) for h, and waits until it
// takes commands. It is stopped when t ends, if the test did not stop it.
func startLink(t *testing.T, o Options, h Handler) *testLink {
	t.Helper()
	r, ready := runLink(t, o, h)
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("the link did not take commands within 20 s (status %+v)", r.Status())
	}
	return r
}

// runLink runs a link as startLink does, without waiting: ready receives
// each time it begins to take commands.
func runLink(t *testing.T, o Options, h Handler) (*testLink, <-chan struct{}) {
	t.Helper()
	ready := make(chan struct{}, 1)
	o.Ready = func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &testLink{Link: New(o, h), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return within 20 s of the stop")
		}
	})
	return r, ready
}

// stop stops the link and returns Run's error and how long the stop took;
// it fails t if Run does not return within d.
func (r *testLink) stop(t *testing.T, d time.Duration) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err, time.Since(start)
	case <-time.After(d):
		t.Fatalf("Run did not return within %v of the stop", d)
		return nil, 0
	}
}
