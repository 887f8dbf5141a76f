package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

// A flood of stale and rejected commands is logged as the first of each
// holder and reason in full, then one line with the count each interval;
// every applied and failed command has a line of its own; duplicates only
// at debug; a flood that stopped is forgotten, and its next command is
// logged in full again.
func TestDecisionLogSummarisesFloods(t *testing.T) {
	var buf bytes.Buffer
	d := newDecisionLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), floodInterval)
	ev := func(id, holder string, o fence.Outcome, reason string, token uint64) actuator.Event {
		return actuator.Event{Scope: "pump", Holder: holder, State: fence.StateOn,
			Result: fence.Result{ID: id, Actuator: "pump", Outcome: o, Reason: reason, Command: fence.Fence{Token: token}, Fence: fence.Fence{Token: 42}}}
	}
	d.decided(ev("b-1", "ctl-b", fence.Applied, "", 42))
	for i := range 1000 {
		d.decided(ev(fmt.Sprint("a-", i), "ctl-a", fence.Stale, "", 41))
	}
	for i := range 300 {
		d.decided(ev(fmt.Sprint("x-", i), "ctl-x", fence.Rejected, fence.ReasonInvalid, 1))
	}
	d.decided(ev("b-1", "ctl-b", fence.Duplicate, "", 42))
	d.decided(ev("b-2", "ctl-b", fence.Failed, "", 42))
	d.decided(ev("b-3", "ctl-b", fence.Applied, "", 42))
	d.tell()
	d.tell() // quiet: kept
	d.tell() // quiet again: forgotten
	d.decided(ev("a-late", "ctl-a", fence.Stale, "", 41))

	type line struct {
		Level, Msg, ID, Holder, Reason string
		Count                          int
	}
	var lines []line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, x)
	}
	want := []line{
		{Level: "INFO", Msg: "applied", ID: "b-1", Holder: "ctl-b"},
		{Level: "INFO", Msg: "stale", ID: "a-0", Holder: "ctl-a"},
		{Level: "WARN", Msg: "rejected", ID: "x-0", Holder: "ctl-x", Reason: fence.ReasonInvalid},
		{Level: "ERROR", Msg: "failed", ID: "b-2", Holder: "ctl-b"},
		{Level: "INFO", Msg: "applied", ID: "b-3", Holder: "ctl-b"},
		{Level: "WARN", Msg: "rejected commands", Holder: "ctl-x", Reason: fence.ReasonInvalid, Count: 299},
		{Level: "INFO", Msg: "stale commands", Holder: "ctl-a", Count: 999},
		{Level: "INFO", Msg: "stale", ID: "a-late", Holder: "ctl-a"},
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("log:\n%v\nwant\n%v", lines, want)
	}
}

// A decision at a level the log drops costs no allocation: the gateway
// decides thousands of commands a second, and building the attributes of
// a line nobody writes was a twentieth of its garbage (gateway bench,
// 64 × 64 fleet).
// The flood counting still runs: a flood is logged at warn.
func TestDecisionLogBelowLevelIsFree(t *testing.T) {
	var buf bytes.Buffer
	d := newDecisionLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), floodInterval)
	e := actuator.Event{Scope: "pump", Holder: "ctl", State: fence.StateOn,
		Result: fence.Result{ID: "c-1", Actuator: "pump", Outcome: fence.Applied, Command: fence.Fence{Token: 42}, Fence: fence.Fence{Token: 42}}}
	if n := testing.AllocsPerRun(100, func() { d.decided(e) }); n != 0 {
		t.Errorf("an applied command logged at warn: %v allocations, want 0", n)
	}
	if buf.Len() != 0 {
		t.Errorf("an applied command logged at warn wrote %q, want nothing", buf.String())
	}
	e.Result.Outcome, e.Result.Reason = fence.Rejected, fence.ReasonInvalid
	d.decided(e)
	if !strings.Contains(buf.String(), `"msg":"rejected"`) {
		t.Errorf("the first rejected command, at warn: log %q, want its line", buf.String())
	}
}
