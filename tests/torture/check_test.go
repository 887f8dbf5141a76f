//go:build linux

package torture

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The history check models each fence scope as a fenced register, as
// docs/protocol.md (Outcomes) specifies the gateway, independently of its
// code: the register holds the scope's fence, the recorded state of each
// of its actuators and the last window commands that raised the fence.
// A command decided in a state either raises the fence to its pair and
// takes effect (applied; or, if it would turn on a member of an
// interlock while another is on, refused: the fence rises, nothing else
// changes), or, if its pair is not above the fence, changes nothing and
// is a duplicate of a remembered command with its id and pair, or stale.
// porcupine then looks for one order of all decisions, each within the
// time between its command's first publication and the arrival of its
// answer, that explains every answer. Applied effects are thereby
// ordered by their fences (an effect never follows one of a higher
// fence), and every answer, with the fence and state it reports, must be
// what the register says at its place in that order. (A command's
// further answers, to its redeliveries and copies, are checked by
// checkAnswers.)

// window is how many commands that raised a scope's fence the gateway
// remembers for duplicates (docs/protocol.md: "the last 32 applied
// commands of the scope").
const window = 32

// input is one operation of the history: a command.
type input struct{ cmd command }

// output is an operation's answer; nil if none was seen, so that the
// command may or may not have been decided.
type output struct{ a *answer }

// remembered is a command that raised a scope's fence.
type remembered struct {
	cmd     command
	refused bool // by the interlock
}

// register is a scope's state. It is never modified: steps make new ones.
type register struct {
	fence  pair
	on     map[string]bool
	recent []remembered // oldest first
	sig    string       // everything above, for Equal and Hash
}

func newRegister(fence pair, on map[string]bool, recent []remembered) *register {
	r := &register{fence: fence, on: on, recent: recent}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|", fence)
	names := make([]string, 0, len(on))
	for n, v := range on {
		if v {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%s|", strings.Join(names, ","))
	for _, m := range recent {
		fmt.Fprintf(&b, "%s %v;", m.cmd, m.refused)
	}
	r.sig = b.String()
	return r
}

func (r *register) state(actuator string) string {
	if r.on[actuator] {
		return "on"
	}
	return "off"
}

// raise returns r with its fence raised to c's pair and c remembered, and
// c's state recorded unless it is refused or fence-only.
func (r *register) raise(c command, refused bool) *register {
	on := r.on
	if !refused && c.State != "" {
		on = make(map[string]bool, len(r.on)+1)
		for k, v := range r.on {
			on[k] = v
		}
		on[c.Actuator] = c.State == "on"
	}
	recent := append(slices.Clone(r.recent[max(0, len(r.recent)-window+1):]), remembered{c, refused})
	return newRegister(c.Pair, on, recent)
}

// refused reports whether the interlock refuses c in r: c turns on a
// member while another member is on.
func (r *register) refused(c command) bool {
	if c.State != "on" || !slices.Contains(interlocked, c.Actuator) {
		return false
	}
	for _, m := range interlocked {
		if m != c.Actuator && r.on[m] {
			return true
		}
	}
	return false
}

// step returns the states that deciding in's command in r leads to with
// out as its answer; none if no decision in r gives that answer.
func step(r *register, in input, out output) []*register {
	c, a := in.cmd, out.a
	if !r.fence.less(c.Pair) {
		// Not above the fence: nothing changes, and the answer must be
		// what the register says.
		if a == nil || notAbove(r, c, *a) {
			return []*register{r}
		}
		return nil
	}
	refused := r.refused(c)
	next := r.raise(c, refused)
	if a == nil {
		return []*register{r, next} // not decided yet, or decided now
	}
	ok := false
	switch {
	case refused:
		ok = a.Outcome == "rejected" && a.Reason == "interlock" && a.Fence == c.Pair
	case a.Outcome == "applied":
		ok = a.Fence == c.Pair && a.State == next.state(c.Actuator)
	case a.Outcome == "duplicate":
		// Applied now, and its answer lost with a gateway process: a
		// redelivery was answered duplicate, with the state it set.
		ok = a.Fence == c.Pair && (c.State == "" || a.State == c.State)
	}
	if ok {
		return []*register{next}
	}
	return nil
}

// notAbove reports whether a is the answer to c, whose pair is not above
// r's fence: a duplicate of the newest remembered command with c's id and
// pair if it is c, else stale with r's fence and the actuator's state.
func notAbove(r *register, c command, a answer) bool {
	for i := len(r.recent) - 1; i >= 0; i-- {
		m := r.recent[i]
		if m.cmd.ID != c.ID || m.cmd.Pair != c.Pair {
			continue
		}
		if m.cmd.Actuator == c.Actuator && m.cmd.State == c.State {
			if m.refused {
				return a.Outcome == "rejected" && a.Reason == "interlock" && a.Fence == c.Pair
			}
			return a.Outcome == "duplicate" && a.Fence == c.Pair && (c.State == "" || a.State == c.State)
		}
		break // the same id and pair, but another command: stale
	}
	return a.Outcome == "stale" && a.Fence == r.fence && a.State == r.state(c.Actuator)
}

// model is the fenced register, partitioned by scope.
func model() porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var scopes []string
			for _, op := range history {
				s := op.Input.(input).cmd.Scope
				if by[s] == nil {
					scopes = append(scopes, s)
				}
				by[s] = append(by[s], op)
			}
			sort.Strings(scopes)
			var out [][]porcupine.Operation
			for _, s := range scopes {
				out = append(out, by[s])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{newRegister(pair{}, map[string]bool{}, nil)} },
		Step: func(state, in, out interface{}) []interface{} {
			var res []interface{}
			for _, r := range step(state.(*register), in.(input), out.(output)) {
				res = append(res, r)
			}
			return res
		},
		Equal: func(a, b interface{}) bool { return a.(*register).sig == b.(*register).sig },
		Hash: func(s interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(*register).sig))
			return h.Sum64()
		},
		DescribeOperation: func(in, out interface{}) string {
			i, o := in.(input), out.(output)
			s := i.cmd.String()
			if o.a == nil {
				return s + " → (no answer)"
			}
			return s + " → " + o.a.String()
		},
		DescribeState: func(s interface{}) string {
			r := s.(*register)
			var on []string
			for n, v := range r.on {
				if v {
					on = append(on, n)
				}
			}
			sort.Strings(on)
			return fmt.Sprintf("fence %s, on: [%s], %d remembered", r.fence, strings.Join(on, " "), len(r.recent))
		},
	}
	return nd.ToModel()
}

// history builds the operations of the run: one per command, from its
// first publication to the answer that tells most (applied, else the
// interlock's refusal, else duplicate, else the first stale answer), or
// to the last stop of the gateway before that answer if it is a
// duplicate and the decision that applied the command was never
// answered; a command never answered ends after everything.
//
// An answer ends its operation when it is first seen: by the observer,
// or by a controller that sent the command and got that answer, whichever
// is earlier. (The observer runs in the test process, whose pauses, a
// garbage collection or the harness reading the logs, delay its
// callbacks: the answers of a tenth of a second would then all seem to
// arrive at once, every command of that time would overlap every other,
// and the check would have orders without end to try.)
func (h *harness) history() []porcupine.Operation {
	h.obs.sync(h.t)
	first := map[key]*op{}
	sent := map[key][]*op{} // every sending of each command
	for _, op := range h.ops() {
		k := op.cmd.key()
		if f := first[k]; f == nil || op.call < f.call {
			first[k] = op
		}
		sent[k] = append(sent[k], op)
	}
	end := now()
	rank := func(a answer) int {
		switch {
		case a.Outcome == "applied":
			return 0
		case a.Outcome == "rejected":
			return 1
		case a.Outcome == "duplicate":
			return 2
		}
		return 3
	}
	var ops []porcupine.Operation
	for k, f := range first {
		as := h.obs.answersOf(k)
		sort.SliceStable(as, func(i, j int) bool { return rank(as[i].a) < rank(as[j].a) })
		in := input{cmd: f.cmd}
		if len(as) == 0 {
			ops = append(ops, porcupine.Operation{ClientId: f.ctl, Input: in, Call: f.call, Output: output{}, Return: end})
			continue
		}
		a := as[0].a
		ret := as[0].t
		for _, o := range sent[k] {
			if o.res != nil && o.ret < ret && sameAnswer(*o.res, a) {
				ret = o.ret
			}
		}
		if a.Outcome == "duplicate" {
			// A duplicate, and no answer to the decision that applied
			// the command: the process that took it was killed before
			// it answered, so it took it before that process stopped.
			// (Not so for the interlock's refusal: its first decision
			// is a refusal too.)
			for _, d := range h.downs {
				if d.at > f.call && d.at < ret {
					ret = d.at
				}
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: f.ctl, Input: in, Call: f.call, Output: output{&a}, Return: ret})
	}
	return ops
}

// checkWait bounds the history check. A legal history of 50 cycles
// (about 60,000 commands) takes about a second (0.5-3 s in seven runs
// of 50 cycles on the 2-core machine). porcupine's memory grows with the
// time it searches, some 50 MB a second: a run that took minutes grew
// to 21 GB, when operations ended with the observer's delayed callbacks
// (see history).
const checkWait = time.Minute

// checkHistory checks the run's history (see model), and that the check
// can fail: two broken variants of the same history must be found
// illegal.
func (h *harness) checkHistory() {
	h.t.Helper()
	ops := h.history()
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(model(), ops, checkWait)
	h.t.Logf("history of %d operations checked in %v: %s", len(ops), time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		// Again, for the partial orders porcupine found, to show them.
		res, info := porcupine.CheckOperationsVerbose(model(), ops, checkWait)
		path := h.visualize(info, filepath.Join(outDir(), fmt.Sprintf("fencegate-torture-%d.html", h.seed)))
		h.fatalf("the history of commands and answers is %s for the fenced register (porcupine; Unknown: undecided within %v): see %s",
			res, checkWait, path)
	}
	for _, m := range mutations {
		broken, what := m(ops)
		if broken == nil {
			h.t.Fatalf("no history to break for %q", what)
		}
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model(), broken, time.Minute)
		h.t.Logf("the history broken by %s: %s in %v", what, res, time.Since(start).Round(time.Millisecond))
		path := h.visualize(info, filepath.Join(h.t.TempDir(), "broken.html"))
		if res != porcupine.Illegal {
			h.t.Errorf("a history with %s is %s, want Illegal: the check cannot fail", what, res)
		} else if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			h.t.Errorf("the check found a history with %s illegal, but wrote no visualization: %v", what, err)
		}
	}
}

// visualize writes porcupine's visualization of info to path, with the
// times the gateway was down, and returns path.
func (h *harness) visualize(info porcupine.LinearizationInfo, path string) string {
	var notes []porcupine.Annotation
	for _, d := range h.downs {
		how := "killed"
		if d.clean {
			how = "stopped"
		}
		end := d.online
		if end == 0 {
			end = now()
		}
		notes = append(notes, porcupine.Annotation{Tag: "gateway", Start: d.at, End: end, Description: how + ", until online again"})
	}
	info.AddAnnotations(notes)
	if err := porcupine.VisualizePath(model(), info, path); err != nil {
		h.t.Errorf("porcupine visualization %s: %v", path, err)
	}
	return path
}

// mutations break a legal history early, as a broken gateway would have
// written it, and say how; they return only the broken scope's
// operations. (An early break keeps porcupine's proof that no order
// explains the history short: it need not order what comes after.)
var mutations = []func([]porcupine.Operation) ([]porcupine.Operation, string){
	// A stale controller's command applied after a higher fence: after
	// two commands applied one after the other, a third with the first
	// one's pair (and another id) is applied.
	func(ops []porcupine.Operation) ([]porcupine.Operation, string) {
		what := "a command applied after its scope's fence had passed it"
		ops = byReturn(ops)
		for j, b := range ops {
			for _, a := range ops[:j] {
				ca, cb := a.Input.(input).cmd, b.Input.(input).cmd
				if !applied(a) || !applied(b) || ca.Scope != cb.Scope || a.Return >= b.Call {
					continue
				}
				c := ca
				c.ID, c.State = "broken", "on"
				x := porcupine.Operation{ClientId: a.ClientId, Input: input{cmd: c}, Call: b.Return + 1,
					Output: output{&answer{Outcome: "applied", Fence: c.Pair, State: "on"}}, Return: b.Return + 2}
				return append(scopeOps(ops, c.Scope), x), what
			}
		}
		return nil, what
	},
	// A stale answer that reports a fence the scope never had.
	func(ops []porcupine.Operation) ([]porcupine.Operation, string) {
		what := "a stale answer with a fence the scope never had"
		ops = byReturn(ops)
		for i, op := range ops {
			if a := op.Output.(output).a; a != nil && a.Outcome == "stale" {
				b := *a
				b.Fence.Token += 1 << 60
				ops[i].Output = output{&b}
				return scopeOps(ops, op.Input.(input).cmd.Scope), what
			}
		}
		return nil, what
	},
}

func applied(op porcupine.Operation) bool {
	a := op.Output.(output).a
	return a != nil && a.Outcome == "applied"
}

// byReturn returns a copy of ops, sorted by the time they returned.
func byReturn(ops []porcupine.Operation) []porcupine.Operation {
	ops = slices.Clone(ops)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Return < ops[j].Return })
	return ops
}

// scopeOps returns the operations of ops for scope.
func scopeOps(ops []porcupine.Operation, scope string) []porcupine.Operation {
	return slices.DeleteFunc(slices.Clone(ops), func(op porcupine.Operation) bool { return op.Input.(input).cmd.Scope != scope })
}

// sameAnswer reports whether a controller's answer is the one the observer
// saw (the controller's has no id).
func sameAnswer(a, b answer) bool {
	return a.Outcome == b.Outcome && a.Reason == b.Reason && a.Fence == b.Fence && a.State == b.State
}
