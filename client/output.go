package client

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// OutputError is Send's error for an applied or duplicate answer that
// says the actuator is not in the state the command asked for: the
// gateway took the command (its fence holds), but the output is
// otherwise now. A duplicate of a command committed just before a crash,
// whose actuator boots off, says so; so does one whose drive failed, or
// one that a later command has since undone. The output is not as asked:
// reread the state and, to set it, send a new command (a higher seq).
type OutputError struct {
	Asked fence.State
	// AskedDuty is a set-point command's duty; nil for others.
	AskedDuty *fence.Duty
	Result    fence.Result
}

func (e *OutputError) Error() string {
	now, asked := e.Result.State.String(), e.Asked.String()
	if e.Result.Actual != "" {
		now = fmt.Sprintf("recorded %s but reads back %s", e.Result.State, e.Result.Actual)
	}
	if d := e.AskedDuty; d != nil {
		asked = "duty " + d.String() + "%"
		switch r := e.Result; {
		case r.Duty == nil:
		case r.ActualDuty != nil:
			now = fmt.Sprintf("recorded at duty %s%% but reads back %s%%", r.Duty, r.ActualDuty)
		default:
			now = "at duty " + r.Duty.String() + "%"
		}
	}
	return fmt.Sprintf("client: %s, but %s is %s now, not %s as asked: the output changed after the command was applied "+
		"(a later command, the boot rule at a restart, or a failed drive); reread the state, and send a new command with a higher seq to set it",
		e.Result.Outcome, e.Result.Actuator, now, asked)
}

// checkOutput is Send's check of an answer to c that reported no error:
// an applied or duplicate answer must say that the actuator is in the
// state c asked for (a fence-only command asks for none).
func checkOutput(c fence.Command, r fence.Result, err error) error {
	if err != nil || c.State == fence.StateNone {
		return err
	}
	if c.Pulse > 0 || r.Pulse != nil {
		// A pulse is on, then back at rest: its answer says how it went
		// (Result.Pulse), not a state to keep.
		return nil
	}
	if r.State != c.State || (r.Actual != "" && r.Actual != c.State.String()) {
		return &OutputError{Asked: c.State, Result: r}
	}
	if c.Setpoint && (r.Duty == nil || *r.Duty != c.Duty || r.ActualDuty != nil) {
		return &OutputError{Asked: c.State, AskedDuty: &c.Duty, Result: r}
	}
	return nil
}
