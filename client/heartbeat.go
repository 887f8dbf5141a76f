package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/fence"
)

// Seq hands out a holder's seq numbers under one token, strictly
// increasing, to its commands and its heartbeats alike: two commands
// under one token never share a pair. The zero value starts at 1.
type Seq struct{ n atomic.Uint64 }

// Next returns the next seq.
func (s *Seq) Next() uint64 { return s.n.Add(1) }

// Last returns the last seq Next handed out (0 before the first).
func (s *Seq) Last() uint64 { return s.n.Load() }

// Pass makes every later Next return more than n: after a stale answer
// under the holder's own token (the fence at n), so that its next command
// is above it.
func (s *Seq) Pass(n uint64) {
	for {
		cur := s.n.Load()
		if cur >= n || s.n.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Heartbeat configures Client.Heartbeat.
type Heartbeat struct {
	// Actuator is any actuator of the scope (the fence is the scope's).
	Actuator string
	// Holder and Token are the lease's: its holder name and fencing token.
	Holder string
	Token  uint64
	// Seq gives the heartbeats' seq numbers; share it with the holder's
	// other commands under Token.
	Seq *Seq
	// Every is the time between heartbeats: well under the scope's
	// dead-man time (safe: after), say a third of it.
	Every time.Duration
	// Timeout is how long one heartbeat waits for its answer (resent
	// meanwhile as Options.Resend says) before Heartbeat gives up; zero
	// means 3×Every, about the dead-man time when Every is a third of it.
	// A busy gateway or broker may answer later than Every: a heartbeat
	// answered late still counts, while one unanswered for about the
	// dead-man time means the scope may already be in its safe state.
	Timeout time.Duration
}

// Heartbeat sends a fence-only command to h.Actuator every h.Every while
// ctx lasts, so that the scope's dead-man (safe: after in the gateway's
// configuration) knows its holder is alive. It returns nil when ctx ends,
// and an error when a heartbeat is not applied: a *StaleError once
// another holder's command raised the fence (the lease is gone: stop
// acting), or the error of a heartbeat that got no answer (a resent
// heartbeat is its redelivery, never a second one). A heartbeat found
// stale under h.Token itself is not an error: the holder's own command,
// with a later seq from the same Seq, reached the gateway first, and the
// scope is still the holder's. A controller runs it in a goroutine for as
// long as it holds the lease. A tick missed while a heartbeat waits for
// its answer is dropped, not made up.
func (cl *Client) Heartbeat(ctx context.Context, h Heartbeat) error {
	if h.Every <= 0 || h.Seq == nil || h.Token == 0 || h.Actuator == "" {
		return errors.New("client: a heartbeat needs an actuator, a token, a Seq and Every > 0")
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 3 * h.Every
	}
	t := time.NewTicker(h.Every)
	defer t.Stop()
	for {
		c := fence.Command{Actuator: h.Actuator, Holder: h.Holder, Fence: fence.Fence{Token: h.Token, Seq: h.Seq.Next()}}
		c.ID = fmt.Sprintf("%s-hb-%d-%d", h.Holder, c.Fence.Token, c.Fence.Seq)
		sctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := cl.Send(sctx, c)
		cancel()
		var stale *StaleError
		if errors.As(err, &stale) && stale.Fence().Token == h.Token {
			h.Seq.Pass(stale.Fence().Seq)
			err = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client: heartbeat %v to %s: %w", c.Fence, h.Actuator, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
