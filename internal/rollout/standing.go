package rollout

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The rules of where machines stand, defined once: the plan (InProgress,
// Settled), the status (Updating), the token (a settled pool's payload)
// and the standing all read them.

// onTarget reports that every machine runs the target: the machines run
// the user-data the MachineDeployment points at, and no old machine is
// left.
func onTarget(md *MachineDeployment, running, target *UserData) bool {
	return md != nil && running != nil && target != nil && running.Name == target.Name && md.Complete
}

// replacing reports an owner's rollout in progress: the machines run
// other user-data than the target, or old machines are left.
func replacing(md *MachineDeployment, running, target *UserData) bool {
	return md != nil && running != nil && target != nil && !onTarget(md, running, target)
}

// forcedInProgress reports a forced rollout on the MachineDeployment that
// still has machines to replace.
func forcedInProgress(md *MachineDeployment) bool {
	return md != nil && md.RolloutAfter != nil && md.MachinesBeforeRolloutAfter > 0
}

// Phase is where a pool's rollout stands, in one word: the API's status.rollout.phase.
type Phase = nodepoolv1.RolloutPhase

// Phases of a pool, in the order the engine weighs them: bad inputs make a
// pool Invalid whatever else goes on; a health gate, a forced rollout's
// failure or a drain under onTimeout Halt that stopped a rollout makes it Halted, or RollingBack while it returns the machines
// to the previous revision; machines being replaced (or about to be, this
// reconcile) make it Rolling; a rollout that waits (pause, maintenance
// window, schedule, missing user-data) makes it Held; otherwise it is
// Scaling until every machine is up to date and ready at the wanted
// count, then Settled.
const (
	PhaseInvalid     = nodepoolv1.RolloutPhaseInvalid
	PhaseHalted      = nodepoolv1.RolloutPhaseHalted
	PhaseRollingBack = nodepoolv1.RolloutPhaseRollingBack
	PhaseRolling     = nodepoolv1.RolloutPhaseRolling
	PhaseHeld        = nodepoolv1.RolloutPhaseHeld
	PhaseScaling     = nodepoolv1.RolloutPhaseScaling
	PhaseSettled     = nodepoolv1.RolloutPhaseSettled
)

// HeldBy is what holds a rollout.
type HeldBy string

// What can hold a rollout. A pause outranks a maintenance window: while
// the pool is paused, the pause holds what a window would hold too.
const (
	HeldByPause             HeldBy = "Pause"
	HeldByMaintenanceWindow HeldBy = "MaintenanceWindow"
	HeldBySchedule          HeldBy = "Schedule"
	HeldByHealthGate        HeldBy = "HealthGate"
	HeldByMissingUserData   HeldBy = "MissingUserData"
)

// Hold is a rollout that waits: what holds it, until when (zero: until a
// person acts, or no window opens within five years) and the sentence
// that says so.
type Hold struct {
	By      HeldBy
	Until   time.Time
	Message string
}

// Steps are what a rollout does: the machines it replaces (or updates in
// place), in how many rounds of at most maxSurge+maxUnavailable machines,
// the health gate's canary machines and the soaks it declares in all.
type Steps struct {
	Machines, Rounds, Canary int32
	Soak                     time.Duration
}

// Why the standing changes by itself.
const (
	NextPauseEnds        = "PauseEnds"
	NextWindowOpens      = "WindowOpens"
	NextScheduledRollout = "ScheduledRollout"
	NextDriftDeadline    = "DriftDeadline"
	NextSoakEnds         = "SoakEnds"
)

// Standing is where a pool stands after a reconcile: the one answer to
// "is it settled", "what rolls", "what holds it and until when", "what
// does a new node boot" and "when does this change by itself". The
// controller publishes it as status.rollout; `kubectl nodepool plan`,
// `status`, `fleet` and the fleet controller read it. Every field is a
// function of the engine's input and holds no clock reading other than
// absolute times, so a pool that does not move keeps the same standing
// (and the controller writes nothing).
type Standing struct {
	Phase Phase
	// Settled is true when nothing rolls (status.updating is empty), no
	// halt holds, and every machine is up to date and ready at the wanted
	// count: the pool is at rest. A held rollout that has not started
	// does not unsettle a pool: its machines stand still. (Plan.Complete
	// is the other question: whether the target's rollout is complete.)
	Settled bool
	// Message says what the phase is doing or waiting for.
	Message string
	// Hold is the rollout that waits, nil when none does.
	Hold *Hold
	// Steps are the steps of the rollout that rolls or waits (nil when
	// none does, or they cannot be told: an OnDelete pool).
	Steps *Steps
	// Changing is what the rollout that rolls or waits changes: Config,
	// Version, Forced.
	Changing []string
	// Boots is the payload a new or replacement machine boots.
	Boots string
	// Next is the next time the decision changes by itself (zero: none
	// known), NextReason why (the Next* constants).
	Next       time.Time
	NextReason string
	// CarriedDrift is the platform drift the rollout in progress applies,
	// measured against what the machines run (status.rollout.carriedDrift,
	// drift.go): its age survives a rollout that ends without applying it.
	CarriedDrift []nodepoolv1.PendingManagementChange
}

// standingOf is where the pool stands, from the finished plan.
func fixWaiting(in Input, d Decision) bool {
	reason, _ := fixWaits(in, d)
	return reason != ""
}

func standingOf(in Input, p *Plan) Standing {
	d := p.Decision
	s := Standing{Boots: d.TokenPayload, Hold: waiting(d, p)}
	md := in.MachineDeployment
	var replicas, upToDate, ready int32
	observed := false // Cluster API has seen the machines' spec and reports on it alone
	if md != nil {
		replicas, upToDate, ready, observed = md.Replicas, md.UpToDateReplicas, md.ReadyReplicas, md.Complete
	}
	s.Settled = p.Updating == "" && !d.Halted() && observed && replicas == d.Replicas && upToDate == d.Replicas && ready == d.Replicas
	starts := d.Action == ActionCreate || d.Action == ActionStart || d.Action == ActionForce
	health := HealthIdle
	if d.Health != nil {
		health = d.Health.Phase
	}
	switch {
	case in.RenderErr != nil:
		s.Phase, s.Message = PhaseInvalid, invalidMessage(p, d.Reason)
	case s.Hold != nil && fixWaiting(in, d):
		// The change that ends a halted rollout waits: the pool stands
		// still until it starts.
		_, s.Message = fixWaits(in, d)
		s.Phase = PhaseHeld
	case d.Halted() || health == HealthRolledBack:
		s.Phase, s.Message = PhaseHalted, conditionMessage(p, nodepoolv1.ConditionRolloutHealthy, d.Reason)
	case health == HealthRollingBack:
		s.Phase, s.Message = PhaseRollingBack, conditionMessage(p, nodepoolv1.ConditionRolloutHealthy, "")
	case p.Updating != "" || starts:
		s.Phase, s.Message = PhaseRolling, rollingMessage(p)
	case s.Hold != nil:
		s.Phase, s.Message = PhaseHeld, s.Hold.Message
	case !s.Settled:
		why := ""
		if !observed {
			why = "waiting for Cluster API to report on the machines' current spec"
		}
		s.Phase, s.Message = PhaseScaling, conditionMessage(p, nodepoolv1.ConditionAllMachinesReady, why)
	default:
		s.Phase = PhaseSettled
	}
	if s.Phase != PhaseSettled && s.Phase != PhaseScaling && s.Phase != PhaseInvalid {
		s.Changing = changing(in, d, p)
		if sh, ok := nextShape(in, d); ok && len(s.Changing) > 0 {
			s.Steps = &Steps{Machines: sh.Machines, Rounds: sh.Rounds, Soak: sh.Soak}
			if d.Health != nil {
				s.Steps.Canary = d.Health.Settings.Canary
			}
		}
	}
	s.Next, s.NextReason = nextChange(in, d, s.Hold)
	return s
}

// Halted reports whether a halt holds the target's rollout: its health
// gate, its forced rollout's canary or a drain halted it. A halted rollout
// is in progress (it never completes by itself, even once every machine
// is on its template: those made meanwhile boot the last healthy payload)
// until the owner changes the pool or a person resumes it.
func (d Decision) Halted() bool {
	return (d.Health != nil && d.Health.Phase == HealthHalted) || (d.Forced != nil && d.Forced.State == ForcedHalted) || (d.Drain != nil && d.Drain.Halt != nil)
}

// waiting is the rollout that waits, and what holds it.
func waiting(d Decision, p *Plan) *Hold {
	switch d.Action {
	case ActionHold:
		if f := d.Forced; f != nil && (f.State == ForcedHalted || f.State == ForcedAfterRollback) {
			return &Hold{By: HeldByHealthGate, Message: d.Reason}
		}
		return &Hold{By: HeldByMissingUserData, Message: d.Reason}
	case ActionSchedule:
		return &Hold{By: HeldBySchedule, Until: d.At, Message: conditionReason(p, nodepoolv1.ReasonRolloutScheduled)}
	case ActionDefer:
		if d.Pause.Paused { // a pause outranks a window
			return &Hold{By: HeldByPause, Until: d.Pause.Until, Message: conditionReason(p, nodepoolv1.ReasonPaused)}
		}
		if h := d.Window.held(); h != nil {
			return &Hold{By: HeldByMaintenanceWindow, Until: h.Until(), Message: h.Message}
		}
	}
	return nil
}

// held is the rollout the maintenance settings hold (nil when none).
func (ws *WindowState) held() *WindowHold {
	if ws == nil {
		return nil
	}
	return ws.Hold
}

// WindowHeld is the hold of a rollout that waits for a maintenance window,
// nil when none does or when the pause holds it first (a pause outranks a
// window).
func (d Decision) WindowHeld() *WindowHold {
	if d.Pause.Paused {
		return nil
	}
	return d.Window.held()
}

// changing is what the rollout that rolls or waits changes.
func changing(in Input, d Decision, p *Plan) []string {
	if p.Updating != "" {
		return strings.Split(p.Updating, ",")
	}
	if d.Forced != nil || d.Action == ActionForce {
		return []string{"Forced"}
	}
	from, to := d.Running, d.Target
	switch {
	case d.RollbackFrom != nil: // the machines go back from the failed rollout
		from = d.RollbackFrom
	case d.Action == ActionDefer && in.Latest != nil:
		from, to = d.Target, pendingTarget(in)
	}
	if from == nil || to == nil {
		return nil
	}
	var out []string
	if from.RolloutWithoutVersion != to.RolloutWithoutVersion {
		out = append(out, "Config")
	}
	if from.Version != to.Version {
		out = append(out, "Version")
	}
	return out
}

// nextChange is the earliest time after now at which the decision changes
// by itself: the pause ends, a held rollout's window opens, a scheduled
// forced rollout is due, pending drift reaches its deadline, a soak ends.
func nextChange(in Input, d Decision, h *Hold) (time.Time, string) {
	var at time.Time
	reason := ""
	consider := func(t time.Time, why string) {
		if t.After(in.Now) && (at.IsZero() || t.Before(at)) {
			at, reason = t, why
		}
	}
	if d.Pause.Paused {
		consider(d.Pause.Until, NextPauseEnds)
	}
	if h != nil {
		switch h.By {
		case HeldByMaintenanceWindow:
			consider(h.Until, NextWindowOpens)
		case HeldBySchedule:
			consider(h.Until, NextScheduledRollout)
		}
	}
	if ws := d.Window; ws != nil && !ws.DeadlinePassed {
		consider(ws.DriftDeadline, NextDriftDeadline)
	}
	if d.Health != nil {
		consider(d.Health.SoakEnds, NextSoakEnds)
	}
	return at, reason
}

// invalidMessage names the validity condition that is False, its reason
// and message (def when none is).
func invalidMessage(p *Plan, def string) string {
	for _, t := range []string{nodepoolv1.ConditionValidMachineConfig, nodepoolv1.ConditionValidGeneratedPayload} {
		if c := meta.FindStatusCondition(p.Conditions, t); c != nil && c.Status == metav1.ConditionFalse {
			return t + " is False (" + c.Reason + "): " + c.Message
		}
	}
	return def
}

// rollingMessage is the message of the updating condition that is True.
func rollingMessage(p *Plan) string {
	for _, c := range p.Conditions {
		if (c.Type == nodepoolv1.ConditionUpdatingConfig || c.Type == nodepoolv1.ConditionUpdatingVersion) && c.Status == metav1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

// conditionReason is the message of the updating condition with reason.
func conditionReason(p *Plan, reason string) string {
	for _, c := range p.Conditions {
		if (c.Type == nodepoolv1.ConditionUpdatingConfig || c.Type == nodepoolv1.ConditionUpdatingVersion) && c.Reason == reason {
			return c.Message
		}
	}
	return ""
}

// conditionMessage is the message of the plan's condition t when it is
// not True, else def.
func conditionMessage(p *Plan, t, def string) string {
	if c := meta.FindStatusCondition(p.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
		return c.Message
	}
	return def
}

// Published is the standing as status.rollout carries it. Times are
// whole seconds, as the API server stores them, so that the standing
// read back equals the one computed.
func (s Standing) Published() *nodepoolv1.RolloutStanding {
	out := &nodepoolv1.RolloutStanding{Phase: s.Phase, Settled: s.Settled, Message: s.Message,
		Changing: s.Changing, Boots: s.Boots, CarriedDrift: s.CarriedDrift}
	if h := s.Hold; h != nil {
		out.Held = &nodepoolv1.RolloutHold{By: string(h.By), Until: apiTime(h.Until), Message: h.Message}
	}
	if st := s.Steps; st != nil {
		out.Steps = &nodepoolv1.RolloutSteps{Machines: st.Machines, Rounds: st.Rounds, Canary: st.Canary}
		if st.Soak > 0 {
			out.Steps.Soak = &metav1.Duration{Duration: st.Soak}
		}
	}
	if t := apiTime(s.Next); t != nil {
		out.Next = &nodepoolv1.RolloutNextChange{At: *t, Reason: s.NextReason}
	}
	return out
}

func apiTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	v := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &v
}

// StandingOf is the standing status.rollout carries (the inverse of
// Published); the zero standing when there is none.
func StandingOf(p *nodepoolv1.RolloutStanding) Standing {
	if p == nil {
		return Standing{}
	}
	s := Standing{Phase: p.Phase, Settled: p.Settled, Message: p.Message, Changing: p.Changing, Boots: p.Boots, CarriedDrift: p.CarriedDrift}
	if h := p.Held; h != nil {
		s.Hold = &Hold{By: HeldBy(h.By), Message: h.Message}
		if h.Until != nil {
			s.Hold.Until = h.Until.Time
		}
	}
	if st := p.Steps; st != nil {
		s.Steps = &Steps{Machines: st.Machines, Rounds: st.Rounds, Canary: st.Canary}
		if st.Soak != nil {
			s.Steps.Soak = st.Soak.Duration
		}
	}
	if n := p.Next; n != nil {
		s.Next, s.NextReason = n.At.Time, n.Reason
	}
	return s
}
