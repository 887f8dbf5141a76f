package fence

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLess(t *testing.T) {
	tests := []struct {
		a, b Fence
		want bool
	}{
		{Fence{41, 0}, Fence{42, 0}, true},
		{Fence{42, 0}, Fence{41, 9}, false},
		{Fence{42, 0}, Fence{42, 1}, true},
		{Fence{42, 1}, Fence{42, 1}, false},
		{Fence{42, 2}, Fence{42, 1}, false},
		{Fence{0, 0}, Fence{1, 0}, true},
		{Fence{MaxToken, 0}, Fence{MaxToken, MaxSeq}, true},
		{Fence{41, MaxSeq}, Fence{42, 0}, true}, // token first
	}
	for _, tt := range tests {
		if got := tt.a.Less(tt.b); got != tt.want {
			t.Errorf("%v.Less(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	recent := []AppliedCommand{
		{ID: "b-1", Actuator: "pump", Fence: Fence{42, 0}, State: StateOff},
		{ID: "b-2", Actuator: "pump", Fence: Fence{42, 1}, State: StateOn},
		{ID: "", Actuator: "fan", Fence: Fence{42, 2}, State: StateOn},
	}
	current := Fence{42, 2}
	cmd := func(id, act string, token, seq uint64, s State) Command {
		return Command{ID: id, Actuator: act, Fence: Fence{token, seq}, State: s}
	}
	tests := []struct {
		name   string
		c      Command
		want   Outcome
		reason string // fragment of Reason
	}{
		{"higher token", cmd("c-1", "pump", 43, 0, StateOn), Applied, ""},
		{"same token higher seq", cmd("b-3", "pump", 42, 3, StateOn), Applied, ""},
		{"higher token lower seq", cmd("c-1", "pump", 43, 0, StateOff), Applied, ""},
		{"fence only above", cmd("c-1", "pump", 43, 0, StateNone), Applied, ""},
		{"paused controller", cmd("a-1", "pump", 41, 0, StateOn), Stale, "below the fence 42/2"},
		{"paused controller high seq", cmd("a-1", "pump", 41, 99, StateOn), Stale, "below the fence"},
		{"equal pair new id", cmd("x", "fan", 42, 2, StateOn), Stale, "equals the fence"},
		{"equal pair other id", cmd("x", "pump", 42, 2, StateOff), Stale, "equals the fence"},
		{"redelivery of newest", cmd("", "fan", 42, 2, StateOn), Duplicate, ""},
		{"redelivery after newer", cmd("b-1", "pump", 42, 0, StateOff), Duplicate, ""},
		{"same id pair other state", cmd("b-1", "pump", 42, 0, StateOn), Stale, "differs"},
		{"same id pair other actuator", cmd("b-1", "fan", 42, 0, StateOff), Stale, "differs"},
		{"same id other pair", cmd("b-1", "pump", 41, 0, StateOff), Stale, "below the fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(current, recent, tt.c, Rules{})
			if d.Outcome != tt.want {
				t.Fatalf("Decide(%v, %+v) = %v (%s), want %v", current, tt.c, d.Outcome, d.Error, tt.want)
			}
			if !strings.Contains(d.Error, tt.reason) {
				t.Errorf("Decide reason = %q, want it to contain %q", d.Error, tt.reason)
			}
			if d.Outcome == Duplicate && (d.Original == nil || d.Original.ID != tt.c.ID || d.Original.Fence != tt.c.Fence) {
				t.Errorf("Decide duplicate Original = %+v, want the command %+v", d.Original, tt.c)
			}
		})
	}
}

func TestDecideEmptyScope(t *testing.T) {
	if d := Decide(Fence{}, nil, Command{Fence: Fence{1, 0}}, Rules{}); d.Outcome != Applied {
		t.Errorf("first command (1,0) on an empty scope = %v, want applied", d.Outcome)
	}
	// (0,0) can never be sent (tokens start at 1) but must not pass an empty fence either.
	if d := Decide(Fence{}, nil, Command{Fence: Fence{0, 0}}, Rules{}); d.Outcome != Stale {
		t.Errorf("(0,0) on an empty scope = %v, want stale", d.Outcome)
	}
}

func TestNewestWindow(t *testing.T) {
	window := make([]AppliedCommand, 0, Window+10) // room for all: appended in place
	var views [][]AppliedCommand
	for i := range Window + 10 {
		window = append(window, Remembered(Command{ID: fmt.Sprint(i), Fence: Fence{uint64(i + 1), 0}}, nil))
		view := Newest(window)
		if want := min(i+1, Window); len(view) != want || cap(view) != want {
			t.Fatalf("after %d commands: len %d, cap %d; want both %d", i+1, len(view), cap(view), want)
		}
		views = append(views, view)
	}
	for i, view := range views {
		if got, want := view[0].ID, fmt.Sprint(max(0, i+1-Window)); got != want {
			t.Errorf("after %d commands the oldest kept is %q, want %q", i+1, got, want)
		}
		if got, want := view[len(view)-1].ID, fmt.Sprint(i); got != want {
			t.Errorf("after %d commands the newest is %q, want %q (a later append changed an earlier view?)", i+1, got, want)
		}
	}
	if v := append(views[len(views)-1], AppliedCommand{ID: "next"}); &v[0] == &window[10] {
		t.Error("appending to a view wrote into the array it views")
	}
	// The newest Window applied commands are all recognised as duplicates.
	recent := views[len(views)-1]
	cur := recent[Window-1].Fence
	for _, a := range recent {
		c := Command{ID: a.ID, Fence: a.Fence}
		if d := Decide(cur, recent, c, Rules{}); d.Outcome != Duplicate {
			t.Errorf("redelivery of %q = %v, want duplicate", a.ID, d.Outcome)
		}
	}
	// One that fell out of the window is stale, never applied.
	if d := Decide(cur, recent, Command{ID: "0", Fence: Fence{1, 0}}, Rules{}); d.Outcome != Stale {
		t.Errorf("redelivery outside the window = %v, want stale", d.Outcome)
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{StateNone, StateOff, StateOn} {
		b, _ := s.MarshalText()
		var got State
		if err := got.UnmarshalText(b); err != nil || got != s {
			t.Errorf("round trip of %v = %v, %v", s, got, err)
		}
	}
	if _, err := ParseState("ON"); err == nil {
		t.Error(`ParseState("ON") succeeded, want an error (states are lower case)`)
	}
}

func TestDecideRules(t *testing.T) {
	on := func(token, seq uint64) Command {
		return Command{ID: "x", Actuator: "pump", Fence: Fence{token, seq}, State: StateOn}
	}
	tests := []struct {
		name    string
		current Fence
		rules   Rules
		c       Command
		want    Outcome
		reason  string // the Reason code
		text    string // in Error
	}{
		{"at the floor", Fence{}, Rules{Floor: 100}, on(100, 7), Stale, "", "not above the store's floor 100"},
		{"below the floor", Fence{}, Rules{Floor: 100}, on(41, 0), Stale, "", "floor 100"},
		{"above the floor", Fence{}, Rules{Floor: 100}, on(101, 0), Applied, "", ""},
		{"floor below the fence", Fence{200, 0}, Rules{Floor: 100}, on(150, 0), Stale, "", "below the fence"},
		{"fence-only at the floor", Fence{}, Rules{Floor: 100}, Command{Actuator: "pump", Fence: Fence{100, 1}}, Stale, "", "floor"},
		{"jump within", Fence{42, 0}, Rules{MaxJump: 10}, on(52, 0), Applied, "", ""},
		{"jump beyond", Fence{42, 0}, Rules{MaxJump: 10}, on(53, 0), Rejected, ReasonTokenJump, "11 above the fence 42"},
		{"jump to the end of the range", Fence{42, 0}, Rules{MaxJump: 10}, on(MaxToken, 0), Rejected, ReasonTokenJump, "max_token_jump is 10"},
		{"fence-only jump", Fence{42, 0}, Rules{MaxJump: 10}, Command{Actuator: "pump", Fence: Fence{MaxToken, 0}}, Rejected, ReasonTokenJump, ""},
		{"jump counts from the floor", Fence{}, Rules{Floor: 1000, MaxJump: 10}, on(1010, 0), Applied, "", ""},
		{"jump beyond the floor", Fence{}, Rules{Floor: 1000, MaxJump: 10}, on(1011, 0), Rejected, ReasonTokenJump, ""},
		{"seq within one token", Fence{42, 0}, Rules{MaxJump: 1}, on(42, MaxSeq), Applied, "", ""},
		{"no limit", Fence{42, 0}, Rules{}, on(MaxToken, 0), Applied, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.current, nil, tt.c, tt.rules)
			if d.Outcome != tt.want || d.Reason != tt.reason {
				t.Fatalf("Decide(%v, %v, %+v) = %v %q (%s), want %v %q", tt.current, tt.c.Fence, tt.rules, d.Outcome, d.Reason, d.Error, tt.want, tt.reason)
			}
			if !strings.Contains(d.Error, tt.text) || (tt.want != Applied && d.Error == "") {
				t.Errorf("Decide error = %q, want it to contain %q", d.Error, tt.text)
			}
		})
	}
}

func ExampleDecide() {
	// Controller B holds token 42 and switched the pump off; A, paused with
	// token 41, wakes and sends "on".
	recent := []AppliedCommand{{ID: "b-7", Actuator: "pump", Fence: Fence{42, 0}, State: StateOff}}
	a := Command{ID: "a-1", Actuator: "pump", Fence: Fence{41, 0}, State: StateOn}
	fmt.Println(Decide(Fence{42, 0}, recent, a, Rules{}).Outcome)
	// Output: stale
}

func TestInterlockEffect(t *testing.T) {
	reject := &Interlock{Name: "vent", Members: []string{"vent-open", "vent-close"}}
	bbm := &Interlock{Name: "vent", Members: []string{"vent-open", "vent-close", "vent-stop"}, BreakBeforeMake: true}
	onSet := func(names ...string) func(string) bool {
		return func(a string) bool {
			for _, n := range names {
				if n == a {
					return true
				}
			}
			return false
		}
	}
	cmd := func(act string, s State) Command { return Command{Actuator: act, Fence: Fence{42, 1}, State: s} }
	tests := []struct {
		name string
		g    *Interlock
		c    Command
		on   []string
		want Effect
	}{
		{"on, nothing else on", reject, cmd("vent-open", StateOn), nil, Effect{Sets: []Set{{Actuator: "vent-open", State: StateOn}}}},
		{"on, itself already on", reject, cmd("vent-open", StateOn), []string{"vent-open"}, Effect{Sets: []Set{{Actuator: "vent-open", State: StateOn}}}},
		{"off is never refused", reject, cmd("vent-open", StateOff), []string{"vent-close"}, Effect{Sets: []Set{{Actuator: "vent-open", State: StateOff}}}},
		{"fence only is never refused", reject, cmd("vent-open", StateNone), []string{"vent-close"}, Effect{}},
		{"on while the other is on: refused", reject, cmd("vent-open", StateOn), []string{"vent-close"},
			Effect{Refusal: &Refusal{Reason: ReasonInterlock, Blocker: "vent-close"}}},
		{"break-before-make: the other off first", bbm, cmd("vent-open", StateOn), []string{"vent-close"},
			Effect{Sets: []Set{{Actuator: "vent-close", State: StateOff}, {Actuator: "vent-open", State: StateOn}}}},
		{"break-before-make: every other off first", bbm, cmd("vent-stop", StateOn), []string{"vent-open", "vent-close"},
			Effect{Sets: []Set{{Actuator: "vent-open", State: StateOff}, {Actuator: "vent-close", State: StateOff}, {Actuator: "vent-stop", State: StateOn}}}},
	}
	for _, tt := range tests {
		got := tt.g.Effect(tt.c, onSet(tt.on...))
		if fmt.Sprint(got.Sets) != fmt.Sprint(tt.want.Sets) || (got.Refusal == nil) != (tt.want.Refusal == nil) {
			t.Errorf("%s: Effect = %+v, want %+v", tt.name, got, tt.want)
			continue
		}
		if r := got.Refusal; r != nil {
			if r.Reason != tt.want.Refusal.Reason || r.Blocker != tt.want.Refusal.Blocker || !strings.Contains(r.Error, "interlock vent: vent-close is on") {
				t.Errorf("%s: Refusal = %+v, want %+v naming vent-close", tt.name, r, tt.want.Refusal)
			}
		}
		// The members switched off are audited as the interlock's, in its words.
		want := Note{}
		if len(got.Sets) > 1 {
			want = Note{OutcomeInterlock, "switched off by " + tt.c.Actuator + "'s command (break-before-make)"}
		}
		if got.Others != want {
			t.Errorf("%s: Others = %+v, want %+v", tt.name, got.Others, want)
		}
	}
}

// A pulse's redelivery is its duplicate; the same id and pair with
// another width is another command, stale: a pulse is never repeated, and
// never changed after it was admitted.
func TestDecidePulse(t *testing.T) {
	c := Command{ID: "p-1", Actuator: "door", Fence: Fence{Token: 5, Seq: 1}, State: StateOn, Pulse: 500 * time.Millisecond}
	recent := []AppliedCommand{Remembered(c, nil)}
	if d := Decide(c.Fence, recent, c, Rules{}); d.Outcome != Duplicate || d.Original.Pulse != c.Pulse {
		t.Errorf("redelivery: %+v, want a duplicate of the pulse", d)
	}
	other := c
	other.Pulse = 600 * time.Millisecond
	if d := Decide(c.Fence, recent, other, Rules{}); d.Outcome != Stale || !strings.Contains(d.Error, "(a pulse of 500ms)") {
		t.Errorf("another width: %+v, want stale naming the pulse", d)
	}
	if e := PulseEffect(c, true); e.Refusal == nil || e.Refusal.Reason != ReasonBusy || len(e.Sets) != 0 {
		t.Errorf("PulseEffect while running = %+v, want refused busy", e)
	}
	if e := PulseEffect(c, false); e.Refusal != nil || e.Pulse != c.Pulse || len(e.Sets) != 1 || e.Sets[0].State != StateOn {
		t.Errorf("PulseEffect at rest = %+v, want on for 500ms", e)
	}
}

// A pulse asks for on whatever its State says; any other command asks
// for its State.
func TestAsks(t *testing.T) {
	for _, tt := range []struct {
		c    Command
		want State
	}{
		{Command{Pulse: time.Millisecond}, StateOn},
		{Command{Pulse: time.Millisecond, State: StateOn}, StateOn},
		{Command{State: StateOff}, StateOff},
		{Command{State: StateOn}, StateOn},
		{Command{}, StateNone},
	} {
		if got := tt.c.Asks(); got != tt.want {
			t.Errorf("%+v asks for %v, want %v", tt.c, got, tt.want)
		}
	}
}
