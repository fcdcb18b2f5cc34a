package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
)

// AnnotationApplyPending on a NodePool asks the controller, on the
// platform's behalf, to apply pending management drift: its value is an
// RFC3339 time; every machine created before it is replaced once
// (`kubectl nodepool rollout apply-pending` sets it to now).
const AnnotationApplyPending = "nodepool.dev/apply-pending-at"

// force is a request to replace every machine created before at.
type force struct {
	at        time.Time
	initiator Initiator
}

// forceRequests returns the forced rollouts requested for the pool:
// spec.management.rolloutAfter (restart), the apply-pending annotation
// (platform), or the Rollout policy with pending drift (policy, at the time
// the newest drift was first seen, so the request is stable across
// reconciles). due is the newest request whose time has come, next the
// earliest one still in the future: a request due now is never held back
// by a later one (apply-pending acts now whatever rolloutAfter says), and
// a later one still runs at its time.
func forceRequests(in Input, pending []nodepoolv1.PendingManagementChange) (due, next *force) {
	consider := func(at time.Time, who Initiator) {
		f := &force{at: at.UTC().Truncate(time.Second), initiator: who}
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
	if v := annotation(in.Pool, AnnotationApplyPending); v != "" {
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			consider(at, InitiatorPlatform)
		}
	}
	if in.Pool.Spec.Management.ManagementUpdates == nodepoolv1.ManagementUpdatesRollout && len(pending) > 0 {
		newest := pending[0].Since.Time
		for _, r := range pending[1:] {
			if r.Since.After(newest) {
				newest = r.Since.Time
			}
		}
		consider(newest, InitiatorPolicy)
	}
	return due, next
}

// applied reports whether the MachineDeployment already carries the
// forced rollout (or a newer one).
func (f *force) applied(md *MachineDeployment) bool {
	return md != nil && md.RolloutAfter != nil && !md.RolloutAfter.Before(f.at)
}

// planForce starts a requested forced rollout once its time has come and
// the pool is not paused: the token is pointed at the latest payload first,
// so the forced rollout also applies pending management drift, then the
// MachineDeployment's rollout.after makes Cluster API replace every machine
// created before that time. It returns whether a forced rollout started.
func planForce(in Input, target *UserData, pending []nodepoolv1.PendingManagementChange, p *Plan) (started bool) {
	md := in.MachineDeployment
	if md != nil && md.RolloutAfter != nil && p.MachineDeployment != nil {
		p.MachineDeployment.RolloutAfter = md.RolloutAfter // never undo a forced rollout
	}
	due, next := forceRequests(in, pending)
	if md == nil || target == nil || in.Latest == nil {
		return false
	}
	// A request whose rollout.after is on the MachineDeployment already,
	// or that no machine is older than (Cluster API would replace
	// nothing: a time before every machine, or the zero time), is done:
	// it neither marks pending drift applied nor writes a record.
	if due != nil && due.initiator == InitiatorPolicy && !due.applied(md) &&
		md.MachinesCreatedBefore(due.at) == 0 && md.MachinesCreatedBefore(due.at.Add(time.Second)) > 0 {
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
	if due != nil && (due.applied(md) || md.MachinesCreatedBefore(due.at) == 0) {
		due = nil
	}
	f := due
	if f == nil {
		f = next
	}
	if f == nil {
		return false
	}
	// A pause holds a forced rollout whenever it is due; one due before
	// the pause ends shows as held by the pause rather than scheduled.
	if until, paused := PausedUntil(in.Pool, in.Now); paused && (until.IsZero() || !f.at.After(until)) {
		if !f.at.After(in.Now) {
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: "RolloutDeferred",
				Message: fmt.Sprintf("a forced rollout (%s) waits: the pool is paused%s", f.initiator, untilText(in.Pool, until))})
		}
		p.deferredForce = f
		return false
	}
	if f.at.After(in.Now) {
		p.scheduled = f
		return false
	}
	store(in, in.Latest, p)
	at := f.at
	for i := range p.Tokens {
		if p.Tokens[i].RolloutHash == target.RolloutHash {
			p.Tokens[i].PayloadHash = in.Latest.Hash
		}
	}
	for i := range p.UserData {
		if p.UserData[i].Name == target.Name {
			p.UserData[i].PayloadHash = in.Latest.Hash
		}
	}
	p.MachineDeployment.RolloutAfter = &at
	var changed []string
	if running, ok := in.Payloads[target.PayloadHash]; ok {
		for _, ch := range payload.Diff(running.Manifest, in.Latest.Manifest) {
			changed = append(changed, ch.Component.Name())
		}
	}
	p.Record = &Record{Initiator: f.initiator, RolloutHash: target.RolloutHash, PayloadHash: in.Latest.Hash,
		Changed: changed, Started: in.Now, ForcedAt: &at}
	p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: "RolloutForced",
		Message: fmt.Sprintf("replacing every machine created before %s (initiator %s), on the latest payload %s",
			at.Format(time.RFC3339), f.initiator, payload.Short(in.Latest.Hash))})
	return true
}

func untilText(pool *nodepoolv1.NodePool, until time.Time) string {
	if invalidPause(pool) {
		return " (" + invalidPauseText(pool) + ")"
	}
	if until.IsZero() {
		return " (pausedUntil: \"true\")"
	}
	return " until " + until.UTC().Format(time.RFC3339)
}
