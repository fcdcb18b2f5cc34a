package rollout

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// planDrift lists the management components in which the payload the
// machines run (or the one a rollout in progress started with) differs
// from the latest payload: status.pendingManagementChanges and the
// ConfigUpdatePending condition. Rollout components never appear here: a
// difference in one of them is a rollout, not drift.
func planDrift(in Input, pending []nodepoolv1.PendingManagementChange, p *Plan) {
	cond := metav1.Condition{Type: nodepoolv1.ConditionConfigUpdatePending}
	switch {
	case in.Latest == nil:
		cond.Status, cond.Reason = metav1.ConditionUnknown, nodepoolv1.ReasonInvalidConfig
		cond.Message = "the latest payload cannot be rendered, so drift cannot be computed"
		p.Pending = in.Pool.Status.PendingManagementChanges
		p.Conditions = append(p.Conditions, cond)
		return
	case pending == nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, nodepoolv1.ReasonAsExpected
		cond.Message = "no payload is pinned yet"
		p.Conditions = append(p.Conditions, cond)
		return
	}
	var names []string
	for _, row := range pending {
		p.Pending = append(p.Pending, row)
		names = append(names, row.Component)
	}
	if len(p.Pending) == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, nodepoolv1.ReasonAsExpected
		p.Conditions = append(p.Conditions, cond)
		return
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, nodepoolv1.ReasonManagementConfigDrift
	cond.Message = fmt.Sprintf("platform components differ from what the nodes run: %s; they apply at the next rollout (spec change, rolloutAfter or `kubectl nodepool rollout apply-pending`)%s",
		strings.Join(names, ", "), newNodesNote(in))
	p.Conditions = append(p.Conditions, cond)
	// An event on the pool only when a component of its own namespace
	// (its pull secret's or trust bundle's content) joins the drift: a
	// platform bump drifts every pool at once, and is reported once, on
	// the management config (docs/operations.md, events); each pool shows
	// it in its condition, status and metrics.
	if own := newlyPending(in.Pool.Status.PendingManagementChanges, names); len(own) > 0 {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventManagementConfigDrift,
			Message: "pending platform changes: " + strings.Join(names, ", ")})
	}
}

// newlyPending lists the components of names not in rows that come from
// the pool's own namespace (inputs.Component.PoolOwn).
func newlyPending(rows []nodepoolv1.PendingManagementChange, names []string) []string {
	var out []string
	for _, n := range names {
		c, err := inputs.ParseComponent(n)
		if err != nil || !c.PoolOwn() || slices.ContainsFunc(rows, func(r nodepoolv1.PendingManagementChange) bool { return r.Component == n }) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// driftRows are the platform drift of a pool: pending is what no rollout
// applies (status.pendingManagementChanges); carried is what the rollout
// in progress applies, measured against what the machines run
// (status.rollout.carriedDrift), nil when none does.
type driftRows struct {
	pending, carried []nodepoolv1.PendingManagementChange
}

// pendingDrift lists the pending management changes against base (the
// user-data the machines run, or the target of a rollout in progress): nil
// when the latest payload or base's payload is unknown, empty when there is
// no drift. A row keeps its since time while the nodes run the same
// digest of its component, however often the platform changes the desired
// one: since is when the nodes first differed from the platform, which
// driftDeadline counts from. A drift that ends (the nodes took the change,
// or the platform went back) and comes again starts anew. desiredSince is
// kept while the desired digest stays, whatever the nodes run (what since
// was before it kept the drift's age).
//
// While a rollout whose target differs from what the machines run is in
// progress, the drift it applies is carried: measured against running, it
// keeps its since in status.rollout.carriedDrift, so that a rollout that
// ends without applying it (rolled back, superseded by an undo) leaves
// the drift as old as it was, and its deadline where it was.
func pendingDrift(in Input, base, running *UserData) driftRows {
	var out driftRows
	out.pending = driftAgainst(in, base)
	if base != nil && running != nil && base.PayloadHash != running.PayloadHash {
		out.carried = driftAgainst(in, running)
		if len(out.carried) == 0 {
			out.carried = nil
		}
	}
	return out
}

// driftAgainst lists the management components in which base's payload
// differs from the latest, each with its since and desiredSince kept from
// the pending rows of the pool's status, and its since from the carried
// ones, for the same running digest.
func driftAgainst(in Input, base *UserData) []nodepoolv1.PendingManagementChange {
	var running *payload.Payload
	if base != nil {
		running = in.Payloads[base.PayloadHash]
	}
	if in.Latest == nil || running == nil {
		return nil
	}
	var carried []nodepoolv1.PendingManagementChange
	if r := in.Pool.Status.Rollout; r != nil {
		carried = r.CarriedDrift
	}
	out := []nodepoolv1.PendingManagementChange{}
	for _, ch := range payload.Diff(running.Manifest, in.Latest.Manifest) {
		if ch.Component.IsRollout() {
			continue
		}
		now := metav1.NewTime(in.Now)
		row := nodepoolv1.PendingManagementChange{
			Component: ch.Component.Name(), Since: now, DesiredSince: &now, Current: ch.From, Desired: ch.To,
		}
		for _, old := range in.Pool.Status.PendingManagementChanges {
			if old.Component != row.Component {
				continue
			}
			if old.Current == row.Current {
				row.Since = old.Since
			}
			if old.Desired == row.Desired {
				t := desiredSince(old)
				row.DesiredSince = &t
			}
		}
		for _, old := range carried {
			// Only the drift's age: the machines a rollout that rolled back
			// made meanwhile did not boot the desired digest, so
			// desiredSince (from when new machines boot it) starts anew.
			if old.Component == row.Component && old.Current == row.Current && old.Since.Before(&row.Since) {
				row.Since = old.Since
			}
		}
		out = append(out, row)
	}
	return out
}

func newNodesNote(in Input) string {
	if in.Pool.Spec.Management.ManagementUpdates == nodepoolv1.ManagementUpdatesNewNodes {
		return "; new nodes already boot the latest payload (managementUpdates: NewNodes)"
	}
	return "; new nodes boot the running nodes' pinned components with current credentials (managementUpdates: OnNextRollout)"
}

// desiredSince is when the row's desired digest was first seen: a row
// written before the field existed has since for it (since then moved with
// the desired digest).
func desiredSince(row nodepoolv1.PendingManagementChange) metav1.Time {
	if row.DesiredSince != nil {
		return *row.DesiredSince
	}
	return row.Since
}
