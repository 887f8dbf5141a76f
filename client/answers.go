package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// ErrTimeout is returned by Send when no answer arrived in time, although
// Send published the command again and again (see Options.Resend). The
// command may or may not have been decided, and a copy still queued in
// the broker may be decided later: reread the state, and send the same
// id, token and seq again (a duplicate is answered, never driven twice).
var ErrTimeout = errors.New("client: no answer from the gateway")

// StaleError is Send's error for a stale answer: the gateway's fence is at
// or above the command's (token, seq). It is normal recovery, not a fault:
// another holder has a newer token. Reread the state (Fence, State) and
// decide; do not retry blindly with the same token.
type StaleError struct{ Result fence.Result }

func (e *StaleError) Error() string {
	return fmt.Sprintf("client: stale: %s (fence %s, %s is %s)", e.Result.Error, e.Result.Fence, e.Result.Actuator, stateWord(e.Result.State))
}

// Fence returns the gateway's current fence of the scope.
func (e *StaleError) Fence() fence.Fence { return e.Result.Fence }

// State returns the actuator's current recorded state.
func (e *StaleError) State() fence.State { return e.Result.State }

// RejectedError is Send's error for a rejected answer: the command was
// malformed or not addressable, and nothing changed. Reason says why.
type RejectedError struct{ Result fence.Result }

func (e *RejectedError) Error() string { return "client: rejected: " + e.Result.Error }

// FailedError is Send's error for a failed answer: the gateway could not
// record the fence durably (nothing was driven) or could not drive the
// output (the fence was recorded). Retry with a higher seq once the gateway
// is healthy.
type FailedError struct{ Result fence.Result }

func (e *FailedError) Error() string { return "client: failed: " + e.Result.Error }

func stateWord(s fence.State) string {
	if s == fence.StateNone {
		return "unknown"
	}
	return s.String()
}

// answerErr maps an answer to Send's error: nil for applied and duplicate.
func answerErr(r fence.Result) error {
	switch r.Outcome {
	case fence.Applied, fence.Duplicate:
		return nil
	case fence.Stale:
		return &StaleError{r}
	case fence.Rejected:
		return &RejectedError{r}
	case fence.Failed:
		return &FailedError{r}
	}
	return fmt.Errorf("client: unknown outcome %q", r.Outcome)
}

// ctxErr is the error of a wait for an answer that ctx ended.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ctx.Err()
}

// ErrorOf returns the error Send returns when r answers c: nil for
// applied and duplicate (an *OutputError if the output is not as c
// asked), a *StaleError, *RejectedError or *FailedError for those
// outcomes. Every client of the protocol maps answers so (see
// conformance/answers.json).
func ErrorOf(c fence.Command, r fence.Result) error { return checkOutput(c, r, answerErr(r)) }
