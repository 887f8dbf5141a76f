package fencelog

import (
	"github.com/fencegate/fencegate/fence"
)

// OutcomeBoot marks an audit entry for a state set at start by an
// actuator's boot policy (boot: on or boot: off); the fence is not touched.
const OutcomeBoot fence.Outcome = "boot"

// OutcomeMoved marks an audit entry for an actuator that the configuration
// moved to another scope; see Log.Bind.
const OutcomeMoved fence.Outcome = "moved"

// OutcomeInterlock marks an audit entry for an actuator that an interlock
// switched off so that another member of it could come on
// (break-before-make); it is written with the command's applied entry.
const OutcomeInterlock fence.Outcome = "interlock"

// OutcomePulse marks an audit entry for the end of a pulse: done, or
// interrupted (see Log.EndPulse).
const OutcomePulse fence.Outcome = "pulse"

// OutcomeSafe marks an audit entry for an output a scope's dead-man set
// to its safe state: no command reached the scope in time, or the broker
// connection was lost. The fence is not touched.
const OutcomeSafe fence.Outcome = "safe"

// OutcomeTrip marks an audit entry for an output a scope's trip input
// sent to its safe state. The fence is not touched.
const OutcomeTrip fence.Outcome = "trip"

// OutcomeMaxOn marks an audit entry for an output switched off because it
// had been on for its max_on. The fence is not touched.
const OutcomeMaxOn fence.Outcome = "max-on"
