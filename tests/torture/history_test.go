//go:build linux

package torture

import (
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// pair is a command's (token, seq), or a fence.
type pair struct {
	Token uint64 `json:"token"`
	Seq   uint64 `json:"seq"`
}

func (p pair) less(q pair) bool { return p.Token < q.Token || p.Token == q.Token && p.Seq < q.Seq }

func (p pair) String() string { return fmt.Sprintf("%d/%d", p.Token, p.Seq) }

func pairOf(f fence.Fence) pair { return pair{f.Token, f.Seq} }

// command is a command as a controller sent it.
type command struct {
	ID       string `json:"id"`
	Actuator string `json:"actuator"`
	Scope    string `json:"scope"`
	Pair     pair   `json:"pair"`
	State    string `json:"state,omitempty"` // "on", "off", or "" (fence-only)
}

// key identifies a command on the wire: its answers carry the same id,
// actuator, token and seq (a controller never sends another state with
// the same key).
type key struct {
	ID, Actuator string
	Pair         pair
}

func (c command) key() key { return key{c.ID, c.Actuator, c.Pair} }

func (c command) String() string {
	s := c.State
	if s == "" {
		s = "fence"
	}
	return fmt.Sprintf("%s %s %s %s", c.ID, c.Actuator, s, c.Pair)
}

func (c command) fence() fence.Command {
	st := fence.StateNone
	switch c.State {
	case "on":
		st = fence.StateOn
	case "off":
		st = fence.StateOff
	}
	return fence.Command{ID: c.ID, Actuator: c.Actuator, Fence: fence.Fence{Token: c.Pair.Token, Seq: c.Pair.Seq}, State: st}
}

// answer is a gateway's answer, as much of it as the checks need.
type answer struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Fence   pair   `json:"fence"`
	State   string `json:"state,omitempty"`
	Error   string `json:"error,omitempty"`
}

func answerOf(r fence.Result) answer {
	return answer{Outcome: string(r.Outcome), Reason: r.Reason, Fence: pairOf(r.Fence), State: r.State.String(), Error: r.Error}
}

func (a answer) String() string {
	s := a.Outcome
	if a.Reason != "" {
		s += "(" + a.Reason + ")"
	}
	return fmt.Sprintf("%s at %s, %s", s, a.Fence, a.State)
}

// logLine is a line of a controller's log: a command sent ("call"), the
// end of its Send ("ret"), with the answer if there was one, or the
// gateway's status as its client has seen it ("status").
type logLine struct {
	Ev     string   `json:"ev"`
	Ctl    int      `json:"ctl"`
	Op     int      `json:"op"`
	T      int64    `json:"t"` // now()
	Kind   string   `json:"kind,omitempty"`
	Cmd    *command `json:"cmd,omitempty"`
	Res    *answer  `json:"res,omitempty"`
	Err    string   `json:"err,omitempty"`
	Status string   `json:"status,omitempty"`
}
