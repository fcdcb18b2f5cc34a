package rollout

import (
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// Action is what the engine decides for a pool's machines in one reconcile.
type Action string

// Actions, in the order the engine weighs them: a pool whose inputs do not
// render is Invalid whatever else is asked; one whose target is gone, or
// whose halted rollout holds a forced rollout that is due, is Held; an owner change Creates or Starts; a due forced rollout Forces;
// what the pause holds is Deferred; a forced rollout in the future is
// Scheduled; else None (a rollout in progress goes on).
const (
	ActionNone     Action = "None"
	ActionCreate   Action = "Create"
	ActionStart    Action = "Start"
	ActionForce    Action = "Force"
	ActionDefer    Action = "Defer"
	ActionSchedule Action = "Schedule"
	ActionHold     Action = "Hold"
	ActionInvalid  Action = "Invalid"
)

// Rolls reports whether the action replaces (or updates) machines, now or
// once its pause or time has come.
func (a Action) Rolls() bool {
	switch a {
	case ActionCreate, ActionStart, ActionForce, ActionDefer, ActionSchedule:
		return true
	}
	return false
}

// Decision is the engine's decision for a pool, computed before anything
// of the plan: the plan is derived from it, and `kubectl nodepool plan`
// and `rollout status` read it, so they say what the controller does.
type Decision struct {
	Action Action
	// Initiator is who the rollout is for (Create, Start, Force, Defer,
	// Schedule).
	Initiator Initiator
	// At is, for a forced rollout (Force, Schedule, or a Defer of one),
	// the time machines must be newer than; for Create and Start, now.
	At time.Time
	// Pause is the pool's pause state now.
	Pause poolmath.Pause
	// Target is the user-data the MachineDeployment points at after this
	// reconcile (nil when there is none: Hold, or Invalid on a new pool);
	// Running the user-data the machines run.
	Target, Running *UserData
	// RollbackFrom is, when the health gate rolls a failed rollout back,
	// the failed target (Target is then what the machines ran before).
	RollbackFrom *UserData
	// TokenPayload is the payload the target's token serves after this
	// reconcile: what a new or replacement machine boots.
	TokenPayload string
	// Replicas is the machine count the pool wants, which the controller
	// writes on the MachineDeployment (MachineSet): spec.replicas, or, for
	// an autoscaled pool, the count the MachineDeployment has (the
	// autoscaler's, Input.MachineDeployment.SpecReplicas) kept within
	// AutoScaling's bounds (poolmath.DesiredReplicas).
	Replicas int32
	// AutoScaling is, for an autoscaled pool, the bounds the controller
	// writes as Cluster API's autoscaler annotations (the autoscaler owns
	// the count within them); nil for a pool of spec.replicas, whose
	// annotations the controller removes.
	AutoScaling *nodepoolv1.AutoScaling
	// Components are the payload components the rollout that rolls or
	// waits changes: the record's of one that starts, else those in which
	// the payload of the MachineDeployment's user-data differs from the
	// latest (nil when none can be told).
	Components []string
	// Strategy is how the pool's machines are replaced (strategy.go):
	// Rounds and Gated say in how many rounds, and how the health gate
	// takes a rollout.
	Strategy Strategy
	// Machines is how many machines the rollout replaces (Create: creates;
	// an InPlace pool: updates in place), once it runs.
	Machines int32
	// InProgress is true while a rollout started earlier is still going.
	InProgress bool
	// Forced is the forced rollout the engine weighed (due, deferred by
	// the pause or scheduled), nil when none is pending.
	Forced *Forced
	// Reason says why, in a sentence (Invalid, Hold).
	Reason string
	// Window is where the maintenance windows stand (window.go), nil
	// without spec.management.maintenance: a rollout they hold is a Defer.
	Window *WindowState
	// Health is the health gate's state (health.go): the phase of a
	// gated rollout, the failing machine and signal; nil for pools
	// without spec.management.health.
	Health *HealthState
	// Standing is where the pool stands once the plan is made
	// (standing.go): its phase, whether it is settled, what holds it,
	// the steps, what a new node boots and when this changes by itself.
	// status.rollout publishes it.
	Standing Standing
	// Drain is where the pool's drains stand against its drain policy
	// (drain.go).
	Drain *DrainState
	// DrainForecast is what the drains of the rollout the decision starts,
	// defers or schedules are predicted to meet (drain_predict.go); nil
	// unless Input.DrainPods was read.
	DrainForecast *DrainForecast
}

// ForcedState is where a forced-rollout request stands.
type ForcedState string

// Forced-rollout states.
const (
	ForcedStarts    ForcedState = "Starts"
	ForcedDeferred  ForcedState = "Deferred"
	ForcedScheduled ForcedState = "Scheduled"
	// ForcedHalted: the pool's rollout is halted by its health gate; the
	// forced rollout waits for a resume or an owner change (ActionHold).
	ForcedHalted ForcedState = "Halted"
	// ForcedAfterRollback: the health gate rolls the pool back; the forced
	// rollout starts once every machine runs the previous revision, as a
	// rollout of its own with its own canary (ActionHold).
	ForcedAfterRollback ForcedState = "AfterRollback"
)

// Forced is a forced-rollout request the engine weighed.
type Forced struct {
	At        time.Time
	Initiator Initiator
	State     ForcedState
}
