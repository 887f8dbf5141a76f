//go:build linux

package torture

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestHistoryModel checks small histories against the fenced register:
// the legal ones pass, and each violation of the protocol is found, with
// a visualization written for it.
func TestHistoryModel(t *testing.T) {
	cmd := func(id, actuator, state string, token, seq uint64) command {
		scope := ""
		for _, a := range actuators {
			if a.name == actuator {
				scope = a.scope
			}
		}
		return command{ID: id, Actuator: actuator, Scope: scope, Pair: pair{token, seq}, State: state}
	}
	ans := func(outcome string, token, seq uint64, state string) *answer {
		return &answer{Outcome: outcome, Fence: pair{token, seq}, State: state}
	}
	refusal := func(token uint64) *answer {
		return &answer{Outcome: "rejected", Reason: "interlock", Fence: pair{token, 0}, State: "off"}
	}
	type o struct {
		ctl       int
		c         command
		a         *answer // nil: never answered
		call, ret int64
	}
	a10 := cmd("a-1", "pump", "on", 10, 0)
	b11 := cmd("b-1", "pump", "off", 11, 0)
	cases := []struct {
		name  string
		ops   []o
		legal bool
	}{
		{"a newer holder fences out an older one", []o{
			{0, a10, ans("applied", 10, 0, "on"), 0, 10},
			{1, b11, ans("applied", 11, 0, "off"), 20, 30},
			{0, cmd("a-2", "pump", "on", 10, 1), ans("stale", 11, 0, "off"), 40, 50},
		}, true},
		{"an older holder applied after a newer one", []o{
			{1, b11, ans("applied", 11, 0, "off"), 0, 10},
			{0, a10, ans("applied", 10, 0, "on"), 20, 30},
		}, false},
		{"concurrent commands applied in fence order", []o{
			{1, b11, ans("applied", 11, 0, "off"), 0, 30},
			{0, a10, ans("applied", 10, 0, "on"), 10, 20},
		}, true},
		{"a stale answer with an old fence", []o{
			{0, a10, ans("applied", 10, 0, "on"), 0, 10},
			{1, b11, ans("applied", 11, 0, "off"), 20, 30},
			{0, cmd("a-2", "pump", "on", 10, 1), ans("stale", 10, 0, "on"), 40, 50},
		}, false},
		{"a stale answer with another state", []o{
			{0, a10, ans("applied", 10, 0, "on"), 0, 10},
			{1, cmd("b-0", "pump", "on", 9, 0), ans("stale", 10, 0, "off"), 20, 30},
		}, false},
		{"a duplicate of an applied command", []o{
			{0, a10, ans("applied", 10, 0, "on"), 0, 10},
			{0, cmd("a-1", "pump", "on", 10, 0), ans("duplicate", 10, 0, "on"), 20, 30},
		}, true},
		{"a duplicate of a command never applied", []o{
			{1, b11, ans("applied", 11, 0, "off"), 0, 10},
			{0, a10, ans("duplicate", 10, 0, "on"), 20, 30},
		}, false},
		{"applied, its answer lost in a crash, its redelivery duplicate", []o{
			{0, a10, ans("duplicate", 10, 0, "on"), 0, 100},
			{1, cmd("b-0", "pump", "off", 9, 0), ans("stale", 10, 0, "on"), 50, 60},
		}, true},
		{"a command never answered that a later answer shows applied", []o{
			{0, a10, nil, 0, 1000},
			{1, cmd("b-0", "pump", "off", 9, 0), ans("stale", 10, 0, "on"), 50, 60},
		}, true},
		{"a command never answered", []o{
			{0, a10, nil, 0, 1000},
			{1, b11, ans("applied", 11, 0, "off"), 50, 60},
		}, true},
		{"a fence that went back", []o{
			{0, a10, ans("applied", 10, 0, "on"), 0, 10},
			{1, b11, ans("applied", 11, 0, "off"), 20, 30},
			{1, cmd("b-2", "pump", "on", 10, 5), ans("applied", 10, 5, "on"), 40, 50},
		}, false},
		{"a shared scope: the fan's fence fences the heater", []o{
			{0, cmd("a-1", "heater", "on", 9, 0), ans("applied", 9, 0, "on"), 0, 10},
			{1, cmd("b-1", "fan", "on", 10, 0), ans("applied", 10, 0, "on"), 20, 30},
			{0, cmd("a-2", "heater", "off", 9, 1), ans("applied", 9, 1, "off"), 40, 50},
		}, false},
		{"the interlock refuses a second on", []o{
			{0, cmd("a-1", "vent-open", "on", 5, 0), ans("applied", 5, 0, "on"), 0, 10},
			{1, cmd("b-1", "vent-close", "on", 6, 0), refusal(6), 20, 30},
			{0, cmd("a-2", "vent-open", "off", 5, 1), ans("stale", 6, 0, "on"), 40, 50},
		}, true},
		{"both members of the interlock on", []o{
			{0, cmd("a-1", "vent-open", "on", 5, 0), ans("applied", 5, 0, "on"), 0, 10},
			{1, cmd("b-1", "vent-close", "on", 6, 0), ans("applied", 6, 0, "on"), 20, 30},
		}, false},
		{"a refusal that did not raise the fence", []o{
			{0, cmd("a-1", "vent-open", "on", 5, 0), ans("applied", 5, 0, "on"), 0, 10},
			{1, cmd("b-1", "vent-close", "on", 6, 0), refusal(6), 20, 30},
			{0, cmd("a-2", "vent-open", "off", 5, 1), ans("applied", 5, 1, "off"), 40, 50},
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ops []porcupine.Operation
			for _, op := range tc.ops {
				ops = append(ops, porcupine.Operation{ClientId: op.ctl, Input: input{op.c}, Call: op.call, Output: output{op.a}, Return: op.ret})
			}
			res, info := porcupine.CheckOperationsVerbose(model(), ops, 10*time.Second)
			want := porcupine.Illegal
			if tc.legal {
				want = porcupine.Ok
			}
			if res != want {
				t.Fatalf("check = %s, want %s", res, want)
			}
			if res == porcupine.Illegal {
				path := filepath.Join(t.TempDir(), "history.html")
				if err := porcupine.VisualizePath(model(), info, path); err != nil {
					t.Fatal(err)
				}
				if st, err := os.Stat(path); err != nil || st.Size() == 0 {
					t.Fatalf("no visualization written: %v", err)
				}
			}
		})
	}
}
