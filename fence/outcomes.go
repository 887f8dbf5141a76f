package fence

// The outcomes of the gateway's own actions: states it set by a rule of
// its own, not because a command asked for them. They appear in the audit
// trail next to the answers' outcomes, and are a public format (gateway
// audit, the dashboard and the docs read them).
const (
	// OutcomeBoot: a state set at start by the boot rule (boot: on or
	// boot: off, a pulse output at rest, a never commanded output off).
	OutcomeBoot Outcome = "boot"
	// OutcomeMoved: an actuator the configuration moved to another scope,
	// its old scope's fence along.
	OutcomeMoved Outcome = "moved"
	// OutcomeInterlock: a member an interlock switched off so that another
	// member could come on (break-before-make); written with the
	// command's applied entry.
	OutcomeInterlock Outcome = "interlock"
	// OutcomePulse: the end of a pulse, done or interrupted.
	OutcomePulse Outcome = "pulse"
	// OutcomeSafe: an output a scope's dead-man set to its safe state (no
	// command reached the scope in time, or the broker connection was
	// lost).
	OutcomeSafe Outcome = "safe"
	// OutcomeTrip: an output a scope's trip input sent to its safe state.
	OutcomeTrip Outcome = "trip"
	// OutcomeMaxOn: an output switched off because it had been on for its
	// max_on.
	OutcomeMaxOn Outcome = "max-on"
)

// Outcomes are the outcomes an audit entry may have: the answers', then
// the gateway's own actions'.
var Outcomes = []Outcome{Applied, Duplicate, Stale, Rejected, Failed,
	OutcomeBoot, OutcomeMoved, OutcomeInterlock, OutcomePulse, OutcomeSafe, OutcomeMaxOn, OutcomeTrip}

// Note says, for the audit trail, which of the gateway's own rules made a
// change and why.
type Note struct {
	Outcome Outcome
	Why     string
}
