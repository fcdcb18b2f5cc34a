package rollout

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// force is a request to replace every machine created before at.
type force struct {
	at        time.Time
	initiator Initiator
}

// forceRequests returns the forced rollouts requested for the pool:
// spec.management.rolloutAfter (restart), the apply-pending annotation
// (platform, or the fleet rollout that wrote it), or the Rollout policy
// with pending drift (policy, at the time the newest desired digest was
// first seen, desiredSince, so the request is stable across reconciles and
// machines made since, which boot the latest payload, are kept). due is
// the newest request whose time has come, next the earliest one still in
// the future: a request due now is never held back
// by a later one (apply-pending acts now whatever rolloutAfter says), and
// a later one still runs at its time.
func forceRequests(in Input, pending []nodepoolv1.PendingManagementChange) (due, next *force) {
	consider := func(at time.Time, who Initiator) {
		f := &force{at: poolmath.RequestTime(at), initiator: who}
		if f.at.After(in.Now) {
			if next == nil || f.at.Before(next.at) {
				next = f
			}
			return
		}
		if due == nil || f.at.After(due.at) {
			due = f
		}
	}
	if ra := in.Pool.Spec.Management.RolloutAfter; ra != nil {
		consider(ra.Time, InitiatorRestart)
	}
	if v := annotation(in.Pool, nodepoolv1.AnnotationApplyPending); v != "" {
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			consider(at, applyPendingInitiator(in.Pool))
		}
	}
	if in.Pool.Spec.Management.ManagementUpdates == nodepoolv1.ManagementUpdatesRollout && len(pending) > 0 {
		newest := desiredSince(pending[0]).Time
		for _, r := range pending[1:] {
			if t := desiredSince(r); t.After(newest) {
				newest = t.Time
			}
		}
		consider(newest, InitiatorPolicy)
	}
	if at, ok := driftDeadlineRequest(in, pending); ok {
		consider(at, InitiatorDeadline)
	}
	return due, next
}

// applied reports whether the MachineDeployment already carries the
// forced rollout (or a newer one).
func (f *force) applied(md *MachineDeployment) bool {
	return md != nil && poolmath.ForcedApplied(md.RolloutAfter, f.at)
}

// decideForce weighs the forced rollouts requested for the pool (nil when
// none is pending): one whose rollout.after is on the MachineDeployment
// already, or that no machine is older than (Cluster API would replace
// nothing: a time before every machine, or the zero time), is done; the
// due one starts unless the pool is paused; a pause holds it whenever it
// is due (one due before the pause ends shows as held by the pause rather
// than scheduled); a later one is scheduled.
func decideForce(in Input, target *UserData, pending []nodepoolv1.PendingManagementChange, pause poolmath.Pause) *Forced {
	md := in.MachineDeployment
	if md == nil || target == nil || in.Latest == nil {
		return nil
	}
	due, next := forceRequests(in, pending)
	created := func(t time.Time) int32 { return poolmath.CreatedBefore(md.MachinesCreated, t) }
	if due != nil && (due.initiator == InitiatorPolicy || due.initiator == InitiatorDeadline) && !due.applied(md) && created(due.at) == 0 && created(due.at.Add(time.Second)) > 0 {
		// Machines made in the very second the drift was first seen are
		// not older than it, so Cluster API would keep them although they
		// may run the old payload: the policy asks for the next second.
		bumped := &force{at: due.at.Add(time.Second), initiator: due.initiator}
		due = nil
		switch {
		case !bumped.at.After(in.Now):
			due = bumped
		case next == nil || bumped.at.Before(next.at):
			next = bumped
		}
	}
	if due != nil && (due.applied(md) || created(due.at) == 0) {
		due = nil
	}
	f := due
	if f == nil {
		f = next
	}
	if f == nil {
		return nil
	}
	out := &Forced{At: f.at, Initiator: f.initiator, State: ForcedStarts}
	switch {
	case pause.Paused && (pause.Until.IsZero() || !f.at.After(pause.Until)):
		out.State = ForcedDeferred
	case f.at.After(in.Now):
		out.State = ForcedScheduled
	}
	return out
}

// planForce writes a forced rollout that starts: the target's token
// serves the latest payload (tokenPointer), so the forced rollout also
// applies pending management drift, and the MachineDeployment's
// rollout.after makes Cluster API replace every machine created before
// that time. A rollout.after already on the MachineDeployment is kept:
// a forced rollout is not undone, except by a rollback (rollbackRolloutAfter).
func planForce(in Input, d Decision, p *Plan) {
	md := in.MachineDeployment
	if md != nil && md.RolloutAfter != nil && p.MachineDeployment != nil {
		p.MachineDeployment.RolloutAfter = md.RolloutAfter
		if d.RollbackFrom != nil && in.InPlace == nil {
			at := rollbackRolloutAfter(in, d.Target, *md.RolloutAfter)
			p.MachineDeployment.RolloutAfter, p.MachineDeployment.ClearRolloutAfter = at, at == nil
		}
	}
	f := d.Forced
	if f == nil {
		return
	}
	if f.State == ForcedDeferred && d.Pause.Paused && !saidPaused(in) {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutDeferred,
			Message: fmt.Sprintf("a forced rollout (%s) waits: the pool is paused%s", f.Initiator, d.Pause.Describe())})
	}
	if d.Action != ActionForce {
		return
	}
	at := f.At
	p.MachineDeployment.RolloutAfter = &at
	// What the token served before the force: a halted forced rollout
	// returns new machines to it (health_halt.go).
	if t, ok := in.Tokens[secrets.TokenSecretName(in.Pool.Name, d.Target.RolloutHash)]; ok && t.PayloadHash != "" {
		before := t.PayloadHash
		if running := runningUserData(in); running != nil && running.Name != d.Target.Name {
			// The force supersedes an owner change still rolling: its
			// payload has not passed; the last healthy one is what the
			// revision it replaces runs.
			if h := lastHealthy(in, d.Target, running); h != "" {
				before = h
			}
		}
		p.record(nodepoolv1.AnnotationForcedFrom, d.Target.RolloutHash+"/"+before+"/"+in.Latest.Hash)
	}
	var changed []string
	if running, ok := in.Payloads[d.Target.PayloadHash]; ok {
		for _, ch := range payload.Diff(running.Manifest, in.Latest.Manifest) {
			changed = append(changed, ch.Component.Name())
		}
	}
	p.Record = &Record{Initiator: f.Initiator, RolloutHash: d.Target.RolloutHash, PayloadHash: in.Latest.Hash,
		Changed: changed, Started: in.Now, ForcedAt: &at}
	p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutForced,
		Message: fmt.Sprintf("replacing every machine created before %s (initiator %s), on the latest payload %s",
			at.Format(time.RFC3339), f.Initiator, payload.Short(in.Latest.Hash))})
}

// rollbackRolloutAfter is the rollout.after a rollback leaves on the
// MachineDeployment, whose rollout.after (at) a failed forced rollout set:
// the creation of the newest MachineSet of the revision it returns to that
// still has machines (nil when none has). Cluster API then takes that
// MachineSet back as the new one and replaces only the failed rollout's
// machines, and those of older MachineSets an earlier forced rollout had
// yet to replace; with at kept, that MachineSet would be older than it
// and every machine would be replaced. A forced request the failed
// rollout carried is not applied, and starts again as a rollout of its
// own, canary first, once the rollback is done (ForcedAfterRollback).
func rollbackRolloutAfter(in Input, target *UserData, at time.Time) *time.Time {
	var newest time.Time
	for _, m := range in.Machines {
		if target != nil && m.UserData == target.Name && m.SetCreated.After(newest) {
			newest = m.SetCreated
		}
	}
	switch {
	case newest.IsZero():
		return nil
	case newest.After(at):
		return &at
	}
	newest = newest.UTC().Truncate(time.Second)
	return &newest
}

// forcedUserData reads a forced rollout's payload from its record onto the
// user-data it rolls. A forced rollout rewrites that user-data (the
// payload its rollout now started with, which pending drift is measured
// against) after the MachineDeployment carries it; a reconcile that
// stopped in between (a conflict, an API error, a restart) left the
// user-data naming the payload before it, and once the machines were
// replaced the token went back to that payload and the drift the rollout
// applied read as pending. The record, written before anything else,
// says what the forced rollout boots: while it is the current one and the
// MachineDeployment carries it, the user-data starts from that payload
// and the plan writes it again (said once, as UserDataRestored).
func forcedUserData(in Input, p *Plan) Input {
	cur, md := in.Current, in.MachineDeployment
	if cur == nil || cur.ForcedAt == nil || md == nil || md.RolloutAfter == nil || md.RolloutAfter.Before(*cur.ForcedAt) {
		return in
	}
	ud, ok := in.UserData[md.DataSecretName]
	if !ok || ud.RolloutHash != cur.RolloutHash {
		return in
	}
	if _, to := forcedPayloads(in, &ud); to != "" && to != ud.PayloadHash {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventUserDataRestored,
			Message: fmt.Sprintf("user-data Secret %s named payload %s, from before the forced rollout of revision %d (its rewrite was lost): written again with %s, the payload the rollout boots",
				ud.Name, payload.Short(ud.PayloadHash), cur.Revision, payload.Short(to))})
		in.UserData = maps.Clone(in.UserData)
		ud.PayloadHash = to
		in.UserData[ud.Name] = ud
	}
	return in
}
