package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// HealthPhase is where a health-gated rollout stands.
type HealthPhase string

// Phases of a health-gated rollout.
const (
	// HealthIdle: no rollout is on trial.
	HealthIdle HealthPhase = ""
	// HealthCanary: the canary machines are being created or soak.
	HealthCanary HealthPhase = "Canary"
	// HealthSoaking: the canary passed; a later machine soaks.
	HealthSoaking HealthPhase = "Soaking"
	// HealthRolling: the canary passed; Cluster API creates the next
	// machines.
	HealthRolling HealthPhase = "Rolling"
	// HealthHalted: a machine failed; no further machine is replaced.
	HealthHalted HealthPhase = "Halted"
	// HealthRollingBack: a machine failed; the pool returns to the
	// previous revision's payload.
	HealthRollingBack HealthPhase = "RollingBack"
	// HealthRolledBack: the rollback is done; the failed configuration
	// waits for the owner's next change.
	HealthRolledBack HealthPhase = "RolledBack"
)

// HealthState is the health gate's part of the Decision.
type HealthState struct {
	Phase    HealthPhase
	Settings poolmath.HealthSettings
	// Machine and Signal name the failing machine and what failed (Halted,
	// RollingBack, RolledBack); Reason is the RolloutHealthy reason.
	Machine, Signal, Reason string
	// Trial counts the machines on the new payload, Passed those whose
	// gate is True.
	Trial, Passed int32
	// Kept counts the machines not being deleted and not on trial, as
	// the machines say (the MachineDeployment's status lags a template
	// change): what the pool runs beside the rollout's trial.
	Kept int32
	// Soaking names the machines soaking now, SoakEnds when the first of
	// them passes (zero when none soaks).
	Soaking  []string
	SoakEnds time.Time
	// RollbackTo is the user-data a rollback returns to.
	RollbackTo string
	// LastHealthy is, while the rollout is Halted, the payload the
	// machines ran before it: the target's token serves it, so new and
	// replacement machines never boot the failing payload ("" when it is
	// not known).
	LastHealthy string
	// record is the halt to record on the pool (AnnotationHalted) when
	// it is new; recorded is true when the pool records it already.
	record   string
	recorded bool
	// next is when the gate must look again.
	next time.Time
	// gates are the gate conditions to write.
	gates []GateAction
}

// GateAction sets a machine's nodepool.dev/Healthy condition.
type GateAction struct {
	Machine         string
	Status          bool
	Reason, Message string
}

// decideHealth is the health gate of a Replace pool with
// spec.management.health: which machines of the rollout in progress are
// on trial, their gates, the phase, and whether a failure rolls back. Nil
// for pools without a health gate.
func decideHealth(in Input, d Decision, running *UserData) *HealthState {
	spec := in.Pool.Spec.Management.Health
	if in.Pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		return decideInPlaceHealth(in, d, running) // health_inplace.go
	}
	if spec == nil {
		return nil
	}
	s := poolmath.Health(spec, d.Replicas)
	h := &HealthState{Settings: *s}
	target := d.Target
	// A forced rollout keeps the user-data: before its first machine is
	// made it has no trial machine, yet its canary goes first too.
	md := in.MachineDeployment
	forcing := d.Action == ActionForce || (md != nil && md.RolloutAfter != nil && md.MachinesBeforeRolloutAfter > 0)
	// A forced rollout after a rollback is a rollout of its own (of the
	// rolled-back revision with the latest platform): on trial like any.
	rolledBack := rollbackHolds(in) && !forcing
	// The time the forced rollout replaces machines made before: the one
	// starting now, or the MachineDeployment's.
	var forcedAt *time.Time
	switch {
	case d.Action == ActionForce && d.Forced != nil:
		at := d.Forced.At
		forcedAt = &at
	case forcing:
		forcedAt = md.RolloutAfter
	}
	// An owner's rollout onto the user-data the oldest machines run is
	// on trial from its start (returning).
	returning := returningSince(in, d, target, running)
	held := haltHolds(in, target) // health_halt.go
	if held != nil {
		h.Machine = held.machine
	}
	onTarget := func(m MachineHealth) bool {
		return target != nil && m.UserData == target.Name && m.Version == target.Version
	}
	// Machines of the target, oldest first: the first s.Canary are the canary.
	var trial []MachineHealth
	var live int32
	for _, m := range in.Machines {
		if m.Deleting {
			continue
		}
		live++
		if failedGate(m.Gate) {
			if onTarget(m) && (h.Machine == "" || h.Machine == m.Name && h.Signal == "") {
				h.Machine, h.Signal, h.Reason = m.Name, m.Gate.Message, nodepoolv1.ReasonRolloutHalted
				if m.Gate.Reason == nodepoolv1.GateReasonProgressDeadlineExceeded {
					h.Reason = nodepoolv1.ReasonProgressDeadlineExceeded
				}
			}
			continue // final: a failed machine stays unavailable
		}
		// A machine whose gate has not passed stays on trial, unless a
		// forced rollout replaces it: it belongs to a rollout that ended
		// (superseded), and the forced rollout's trial is only its own
		// machines (made since its time), so its canary is one of them,
		// even when it supersedes an owner's rollout whose machines
		// passed: the forced rollout boots another payload.
		var onTrial bool
		if forcing {
			// Machines made after the request's time but before the
			// forced rollout started (their gate said NotOnTrial then)
			// are kept by Cluster API and boot what they booted: not its.
			notOnTrial := m.Gate != nil && m.Gate.Status && m.Gate.Reason == nodepoolv1.GateReasonNotOnTrial
			onTrial = onTarget(m) && !rolledBack && forcedAt != nil && !m.setCreated().Before(*forcedAt) && !notOnTrial
		} else {
			onTrial = onTarget(m) && !rolledBack && (running == nil || running.Name != target.Name ||
				(m.Gate != nil && !m.Gate.Status) || forcedTrial(md, m) || returning != nil && !m.Created.Before(*returning))
		}
		if running == nil && m.Gate == nil {
			onTrial = false // a new pool's first machines: nothing to compare with
		}
		if !onTrial {
			if m.Gate != nil && m.Gate.Status {
				continue // passed already (Soaked) or never on trial
			}
			h.gate(m, true, nodepoolv1.GateReasonNotOnTrial, "no rollout is testing this machine's payload")
			continue
		}
		trial = append(trial, m)
	}
	sort.SliceStable(trial, func(i, j int) bool {
		if !trial[i].Created.Equal(trial[j].Created) {
			return trial[i].Created.Before(trial[j].Created)
		}
		return trial[i].Name < trial[j].Name
	})
	h.Trial = int32(len(trial))
	h.Kept = live - h.Trial
	halted := h.Machine != ""
	canaryDone := true
	for i, m := range trial {
		soak, what := s.Soak, "soak"
		if int32(i) < s.Canary {
			soak, what = s.CanarySoak, "canary soak"
		}
		// While halted no machine passes; beyond the canary none passes
		// before every canary machine did (the canary holds its round).
		hold, why := "", ""
		switch {
		case halted:
			hold, why = nodepoolv1.GateReasonHalted, fmt.Sprintf("the rollout is halted (machine %s failed); held until the pool changes or the rollout is resumed", h.Machine)
		case int32(i) >= s.Canary && !canaryDone:
			hold, why = nodepoolv1.GateReasonWaitingForCanary, fmt.Sprintf("held until the %d canary machine(s) soaked for %s", s.Canary, s.CanarySoak)
		}
		passed := m.Gate != nil && m.Gate.Status
		switch {
		case passed:
		case m.Healthy && hold != "":
			h.gate(m, false, hold, fmt.Sprintf("node %s healthy since %s; %s", m.Node, m.HealthySince.UTC().Format(time.RFC3339), why))
		case m.Healthy && !in.Now.Before(m.HealthySince.Add(soak)):
			passed = true
			h.gate(m, true, nodepoolv1.GateReasonSoaked, fmt.Sprintf("node %s stayed healthy for the %s of %s", m.Node, what, soak))
		case m.Healthy:
			ends := m.HealthySince.Add(soak)
			h.Soaking = append(h.Soaking, m.Name)
			if h.SoakEnds.IsZero() || ends.Before(h.SoakEnds) {
				h.SoakEnds = ends
			}
			h.at(ends)
			h.gate(m, false, nodepoolv1.GateReasonSoaking, fmt.Sprintf("node %s healthy since %s; the %s of %s ends at %s",
				m.Node, m.HealthySince.UTC().Format(time.RFC3339), what, soak, ends.UTC().Format(time.RFC3339)))
		case m.Gate != nil && m.Gate.Reason == nodepoolv1.GateReasonSoaking:
			h.fail(m, nodepoolv1.GateReasonFailed, nodepoolv1.ReasonRolloutHalted, fmt.Sprintf("node %s turned unhealthy during its %s: %s", m.Node, what, m.Signal))
		case !in.Now.Before(m.Created.Add(s.ProgressDeadline)):
			signal := "no node"
			if m.Node != "" {
				signal = "node " + m.Node + ": " + m.Signal
			}
			h.fail(m, nodepoolv1.GateReasonProgressDeadlineExceeded, nodepoolv1.ReasonProgressDeadlineExceeded, fmt.Sprintf("not healthy within the progress deadline of %s: %s", s.ProgressDeadline, signal))
		default:
			h.at(m.Created.Add(s.ProgressDeadline))
			signal := "no node yet"
			if m.Node != "" {
				signal = "node " + m.Node + ": " + m.Signal
			}
			h.gate(m, false, nodepoolv1.GateReasonWaitingForNode, fmt.Sprintf("waiting for a healthy node (%s) until %s",
				signal, m.Created.Add(s.ProgressDeadline).UTC().Format(time.RFC3339)))
		}
		if passed {
			h.Passed++
		} else if int32(i) < s.Canary {
			canaryDone = false
		}
	}
	if h.Trial < s.Canary {
		canaryDone = false
	}
	inProgress := d.InProgress || d.Action == ActionStart
	switch {
	case rolledBack:
		h.Phase, h.Reason = HealthRolledBack, nodepoolv1.ReasonRolloutHalted
		if inProgress {
			h.Phase, h.Reason = HealthRollingBack, nodepoolv1.ReasonRollingBack
		}
		h.Machine = recorded(in, nodepoolv1.AnnotationRolledBack)
	case h.Machine != "":
		h.Phase = HealthHalted
		if s.Policy == nodepoolv1.FailurePolicyRollback && held == nil && running != nil && target != nil && running.Name != target.Name {
			h.Phase, h.Reason, h.RollbackTo = HealthRollingBack, nodepoolv1.ReasonRollingBack, running.Name
		} else {
			haltedHealth(in, h, held, target, running) // health_halt.go
		}
	case !inProgress && !forcing || len(trial) == 0 && !forcing && returning == nil && (running == nil || target == nil || running.Name == target.Name):
		h.Phase = HealthIdle
	case !canaryDone:
		h.Phase = HealthCanary
	case len(h.Soaking) > 0:
		h.Phase = HealthSoaking
	default:
		h.Phase = HealthRolling
	}
	return h
}

// forcedTrial reports whether m is a machine a forced rollout in progress
// made (rolloutAfter, apply-pending, the Rollout policy, a fleet
// rollout): the user-data keeps its name, but its token serves the latest
// payload, so the machines Cluster API makes to replace those created
// before rollout.after boot something new and are on trial like any
// rollout's.
func forcedTrial(md *MachineDeployment, m MachineHealth) bool {
	return md != nil && md.RolloutAfter != nil && md.MachinesBeforeRolloutAfter > 0 && !m.setCreated().Before(*md.RolloutAfter)
}

// returningSince is when the owner's rollout of target started, for a
// rollout onto the user-data the pool's oldest machines run: a
// configuration applied again while the rollout that left it is still in
// progress, its MachineSet still holding machines. Its user-data keeps its
// name, but its token serves the payload the rollout starts with
// (tokens.go), which the old machines may never have run (the platform
// changed meanwhile; seed 6855), so the machines made since it started
// are on trial like any rollout's. Nil for any other rollout (a new
// pool's first is none: its MachineDeployment's status says its first
// machines are there only a while after they are), and once the rollout
// ended.
func returningSince(in Input, d Decision, target, running *UserData) *time.Time {
	if target == nil || running == nil || running.Name != target.Name {
		return nil
	}
	// Its user-data was made before it started (by the rollout it
	// returns to), not by it: an owner's rollout whose old machines are
	// all gone also runs its own user-data before its MachineDeployment
	// is complete, and its later machines are not on trial (a Secret's
	// creation time has whole seconds).
	reused := func(start time.Time) *time.Time {
		if target.Created.IsZero() || !target.Created.Before(start.Truncate(time.Second)) {
			return nil
		}
		return &start
	}
	if d.Action == ActionStart {
		return reused(in.Now) // the record this plan starts
	}
	cur := in.Current
	if !d.InProgress || cur == nil || !cur.InProgress || cur.Forced || cur.RolloutHash != target.RolloutHash || cur.Started.IsZero() ||
		cur.Revision <= 1 { // a new pool's first machines: nothing to compare with
		return nil
	}
	return reused(cur.Started)
}

// setCreated is the time Cluster API compares with rollout.after.
func (m MachineHealth) setCreated() time.Time {
	if m.SetCreated.IsZero() {
		return m.Created
	}
	return m.SetCreated
}

// rollbackHolds reports whether the pool's inputs still render to the
// rollout the health gate rolled back.
func rollbackHolds(in Input) bool {
	v := recorded(in, nodepoolv1.AnnotationRolledBack)
	return v != "" && in.Latest != nil && in.Hashes.Rollout == v
}

// rolledBackLatest is the input as the engine must read it after a
// rollback: while the pool's inputs still render the rollout that failed,
// the latest payload is the rolled-back revision's own configuration
// with the current platform (payload.ComposeRollout). Everything that
// boots "the latest payload" (a forced rollout, NewNodes and Rollout
// policies, the drift the pool reports) then boots that, never the
// payload that failed; a new rollout of the failed change starts only
// from an owner change.
func rolledBackLatest(in Input) Input {
	if !rollbackHolds(in) {
		return in
	}
	return latestForTarget(in, currentTarget(in)) // tokens.go
}

func (h *HealthState) gate(m MachineHealth, ok bool, reason, msg string) {
	if m.Gate != nil && m.Gate.Status == ok && m.Gate.Reason == reason && m.Gate.Message == msg {
		return
	}
	h.gates = append(h.gates, GateAction{Machine: m.Name, Status: ok, Reason: reason, Message: msg})
}

// failedGate reports whether a gate says its machine failed (final).
func failedGate(g *Gate) bool {
	return g != nil && !g.Status && (g.Reason == nodepoolv1.GateReasonFailed || g.Reason == nodepoolv1.GateReasonProgressDeadlineExceeded)
}

func (h *HealthState) fail(m MachineHealth, gateReason, reason, signal string) {
	h.gate(m, false, gateReason, signal)
	if h.Machine == "" {
		h.Machine, h.Signal, h.Reason = m.Name, signal, reason
	}
}

func (h *HealthState) at(t time.Time) {
	if h.next.IsZero() || t.Before(h.next) {
		h.next = t
	}
}

// rollbackRecord is the history record of a rollback: the previous
// revision's rollout, started again, naming the failed one.
func rollbackRecord(in Input, to, failed *UserData) *Record {
	r := &Record{Initiator: InitiatorRollback, RolloutHash: to.RolloutHash, PayloadHash: to.PayloadHash, Started: in.Now}
	if failed != nil {
		r.RollbackOf = failed.RolloutHash
	}
	return r
}

// planHealth writes the health gate's part of the plan: the gates, the
// RolloutHealthy condition with an event when it changes, the failed
// rollout's outcome on a rollback, and when to look again.
func planHealth(in Input, d Decision, p *Plan) {
	h := d.Health
	if h == nil {
		if meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy) != nil {
			p.Conditions = append(p.Conditions, metav1.Condition{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionTrue,
				Reason: nodepoolv1.ReasonAsExpected, Message: "rollouts are not health-gated (no spec.management.health)"})
		}
		return
	}
	p.Gates = h.gates
	c := metav1.Condition{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	switch h.Phase {
	case HealthIdle:
		// No message: the standing says no rollout is on trial.
	case HealthCanary:
		c.Message = fmt.Sprintf("canary: %d of %d canary machines passed their soak of %s", min(h.Passed, h.Settings.Canary), h.Settings.Canary, h.Settings.CanarySoak)
		if held := holdScaleUp(in, d, p); held != "" {
			c.Message += "; " + held
			if was := meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); was == nil || !strings.Contains(was.Message, held) {
				p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventScaleUpWaitsForCanary, Message: held})
			}
		}
	case HealthSoaking, HealthRolling:
		c.Message = fmt.Sprintf("the canary passed; %d machines on the new payload passed their soak", h.Passed)
	case HealthHalted:
		c.Status, c.Reason = metav1.ConditionFalse, h.Reason
		c.Message = fmt.Sprintf("rollout halted: machine %s %s; no further machine is replaced until the pool changes", h.Machine, h.Signal)
		if h.LastHealthy != "" {
			c.Message += fmt.Sprintf(" (or the rollout is resumed); new machines boot the last healthy payload %s", payload.Short(h.LastHealthy))
		}
		if was := meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); h.recorded && was != nil &&
			was.Status == metav1.ConditionFalse && strings.Contains(was.Message, "machine "+h.Machine+" ") {
			// A recorded halt is the same fact once its machine is gone
			// or recovered: said (and counted) once.
			c.Reason, c.Message = was.Reason, was.Message
		}
	case HealthRollingBack:
		c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonRollingBack
		c.Message = fmt.Sprintf("rolling back to the previous revision: machine %s %s", h.Machine, h.Signal)
		if h.RollbackTo == "" {
			c.Message = fmt.Sprintf("rolling back to the previous revision (the rollout %s failed its health check)", h.Machine)
		}
	case HealthRolledBack:
		c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonRolloutHalted
		c.Message = fmt.Sprintf("rolled back: the rollout %s failed its health check; every machine runs the previous revision until the pool changes", h.Machine)
	}
	p.Conditions = append(p.Conditions, c)
	if was := meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); c.Status == metav1.ConditionFalse &&
		(was == nil || was.Reason != c.Reason || was.Message != c.Message) {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: c.Reason, Message: c.Message})
	}
	if h.record != "" {
		p.record(nodepoolv1.AnnotationHalted, h.record)
	}
	holdSurge(in, h, p)
	if h.RollbackTo != "" {
		p.record(nodepoolv1.AnnotationRolledBack, in.Hashes.Rollout)
		p.Finish, p.FinishedAt = OutcomeFailed, in.Now
	}
}

// holdSurge makes the canary hold its round: while a Replace rolling
// update's canary is on trial (or the rollout is halted), Cluster API may
// make no more new machines than the canary and take no old one down, so
// no machine beyond the canary is made on an untested payload whatever
// maxSurge and maxUnavailable say.
func holdSurge(in Input, h *HealthState, p *Plan) {
	if p.MachineDeployment == nil || in.InPlace != nil || in.Pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace ||
		in.Pool.Spec.Management.Replace.Strategy == nodepoolv1.ReplaceStrategyOnDelete {
		return
	}
	if h.Phase != HealthCanary && h.Phase != HealthHalted {
		return
	}
	surge, none := intstr.FromInt32(max(h.Settings.Canary, 1)), intstr.FromInt32(0)
	p.MachineDeployment.MaxSurge, p.MachineDeployment.MaxUnavailable = &surge, &none
}

// holdScaleUp makes a scale-up wait for the canary: while a Replace
// rolling update's canary is on trial (maxSurge the canary, maxUnavailable
// 0: holdSurge), Cluster API adds on the new MachineSet as many machines
// as the MachineDeployment's replicas plus the surge exceed the old
// machines: a scale-up, or machines an earlier round took down, would
// all boot a payload no canary has passed. So the MachineDeployment holds
// the count of the machines it keeps beside the trial (a scale-down goes
// ahead) until the canary
// passes, or fails (a halted rollout's token serves the last healthy
// payload, so the pool then grows on that). An autoscaled pool's count is
// the autoscaler's and is not held. It returns what it says on
// RolloutHealthy ("" when nothing waits).
func holdScaleUp(in Input, d Decision, p *Plan) string {
	h, md := d.Health, in.MachineDeployment
	if h == nil || h.Phase != HealthCanary || p.MachineDeployment == nil || in.InPlace != nil ||
		in.Pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace || in.Pool.Spec.Management.Replace.Strategy == nodepoolv1.ReplaceStrategyOnDelete ||
		md == nil || d.AutoScaling != nil {
		return ""
	}
	// Never fewer than the machines kept: a count below them would make
	// Cluster API delete them, and each deletion would lower it again.
	keep := h.Kept
	switch {
	case in.NodesUnread:
		// The machines cannot be judged (the workload cluster's Nodes
		// are unread, the first seconds after a start): a hold stays as
		// the MachineDeployment has it, neither released nor lowered.
		keep = ptr.Deref(md.SpecReplicas, d.Replicas)
	case keep <= 0:
		// No machine is kept beside the trial (they were all deleted):
		// the pool grows on the canary (and the trial machines it has),
		// as Cluster API makes no new machine beyond the replicas.
		keep = max(h.Trial, min(h.Settings.Canary, d.Replicas))
	}
	if keep <= 0 || keep >= d.Replicas {
		return ""
	}
	p.MachineDeployment.Replicas = &keep
	return fmt.Sprintf("%d of %d machines wait for the canary (the MachineDeployment keeps %d until it passes), so no new machine boots a payload no canary has passed",
		d.Replicas-keep, d.Replicas, keep)
}

// rollingBack reports whether the health gate's rollback is in progress:
// it holds (rollbackHolds) and machines of the failed rollout, or made
// before a forced rollout's time, are left. A forced rollout that started
// now would take the rollback's machines (which boot the previous
// revision) as its canary.
func rollingBack(in Input) bool {
	md := in.MachineDeployment
	return rollbackHolds(in) && md != nil && (!md.Complete || forcedInProgress(md))
}

// healthRollback switches the decision's target to what the machines ran
// before when the health gate rolls back; it returns the failed target.
func healthRollback(d *Decision, running *UserData) *UserData {
	if d.Health == nil || d.Health.RollbackTo == "" || running == nil {
		return nil
	}
	failed := d.Target
	d.Target = running
	return failed
}

// requeueHealth looks again when a soak ends or a progress deadline
// passes, and while a rollout is on trial at least every rolloutPoll.
func requeueHealth(in Input, d Decision, p *Plan) {
	h := d.Health
	if h == nil {
		return
	}
	if !h.next.IsZero() {
		p.RequeueAfter = minPositive(p.RequeueAfter, max(h.next.Sub(in.Now), 0)+time.Second)
		p.DueAfter = minPositive(p.DueAfter, max(h.next.Sub(in.Now), 0)+time.Second)
	}
	if h.Phase != HealthIdle && h.Phase != HealthRolledBack {
		p.RequeueAfter = minPositive(p.RequeueAfter, rolloutPoll(in, p))
	}
}

// HealthPhaseOf reads back the phase the RolloutHealthy condition c says
// (planHealth writes it): False with reason RollingBack is RollingBack,
// any other False a stopped rollout (Halted: halted, past its progress
// deadline, or rolled back); True or no condition says nothing (Idle).
func HealthPhaseOf(c *metav1.Condition) HealthPhase {
	switch {
	case c == nil || c.Status != metav1.ConditionFalse:
		return HealthIdle
	case c.Reason == nodepoolv1.ReasonRollingBack:
		return HealthRollingBack
	}
	return HealthHalted
}
