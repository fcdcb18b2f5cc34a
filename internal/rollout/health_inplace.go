package rollout

import (
	"fmt"
	"sort"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// decideInPlaceHealth is the health gate of an InPlace pool: while an
// update is in progress, each node updated to the target soaks (canarySoak
// for the first canary nodes, soak for the rest) before the next node
// starts, and a node that is unhealthy after its update halts the update
// (or, with Rollback, returns the pool to what its nodes ran before).
// There is no readiness gate: planInPlace holds the next node itself
// (inPlaceHealthHold).
func decideInPlaceHealth(in Input, d Decision, running *UserData) *HealthState {
	spec := in.Pool.Spec.Management.Health
	if spec == nil || in.InPlace == nil {
		return nil
	}
	h := &HealthState{Settings: *poolmath.Health(spec, d.Replicas)}
	target := d.Target
	if rollbackHolds(in) {
		h.Phase, h.Reason, h.Machine = HealthRolledBack, nodepoolv1.ReasonRolloutHalted, recorded(in, nodepoolv1.AnnotationRolledBack)
		if d.InProgress {
			h.Phase, h.Reason = HealthRollingBack, nodepoolv1.ReasonRollingBack
		}
		return h
	}
	if target == nil {
		return h
	}
	health := map[string]MachineHealth{}
	for _, m := range in.Machines {
		health[m.Name] = m
	}
	// A forced rollout keeps the user-data's name: the nodes updated
	// since its time are its own (the record has second precision).
	start := target.Created.Truncate(time.Second)
	forcedAt := inPlaceForcedAt(in, d)
	if forcedAt != nil && forcedAt.Truncate(time.Second).After(start) {
		start = forcedAt.Truncate(time.Second)
	}
	var updated []InPlaceMachine
	due := false
	for _, m := range in.InPlace.Machines {
		onTarget := m.DataSecretName == target.Name && m.Version == target.Version
		if !onTarget || m.Phase != "" || (forcedAt != nil && m.UpdatedAt.Before(*forcedAt)) {
			due = true
			continue
		}
		if !m.UpdatedAt.Before(start) {
			updated = append(updated, m)
		}
	}
	held := haltHolds(in, target) // health_halt.go
	if held != nil {
		h.Machine = held.machine
	}
	if !due && held == nil {
		return h // no update in progress
	}
	sort.SliceStable(updated, func(i, j int) bool { return updated[i].UpdatedAt.Before(updated[j].UpdatedAt) })
	h.Trial = int32(len(updated))
	for i, m := range updated {
		mh, ok := health[m.Machine]
		if !ok {
			continue
		}
		soak := h.Settings.Soak
		if int32(i) < h.Settings.Canary {
			soak = h.Settings.CanarySoak
		}
		since := mh.HealthySince
		if since.Before(m.UpdatedAt) {
			since = m.UpdatedAt
		}
		booting := mh.Node == "" && !mh.Created.Before(m.UpdatedAt) // made, not updated in place
		switch {
		case !mh.Healthy && booting && in.Now.Before(mh.Created.Add(h.Settings.ProgressDeadline)):
			// A new machine (a repair's, a scale-up's) has no node yet:
			// judged at its progress deadline, as a Replace pool's is,
			// never as an update that failed (seed 4186). It holds the
			// next node meanwhile.
			h.Soaking = append(h.Soaking, m.Machine)
			h.at(mh.Created.Add(h.Settings.ProgressDeadline))
		case !mh.Healthy:
			if h.Machine == "" || h.Machine == m.Machine && h.Signal == "" {
				h.Machine, h.Reason = m.Machine, nodepoolv1.ReasonRolloutHalted
				h.Signal = fmt.Sprintf("node %s is unhealthy after its in-place update: %s", m.Node, mh.Signal)
			}
		case !in.Now.Before(since.Add(soak)):
			h.Passed++
		default:
			h.Soaking = append(h.Soaking, m.Machine)
			if ends := since.Add(soak); h.SoakEnds.IsZero() || ends.Before(h.SoakEnds) {
				h.SoakEnds = ends
			}
			h.at(since.Add(soak))
		}
	}
	switch {
	case h.Machine != "":
		h.Phase = HealthHalted
		if h.Settings.Policy == nodepoolv1.FailurePolicyRollback && held == nil && running != nil && running.Name != target.Name {
			h.Phase, h.Reason, h.RollbackTo = HealthRollingBack, nodepoolv1.ReasonRollingBack, running.Name
		} else {
			haltedHealth(in, h, held, target, running) // health_halt.go
		}
	case h.Passed < h.Settings.Canary:
		h.Phase = HealthCanary
	case len(h.Soaking) > 0:
		h.Phase = HealthSoaking
	default:
		h.Phase = HealthRolling
	}
	return h
}

// inPlaceForcedAt is the time of the forced rollout an InPlace pool
// carries out (nodes updated before it are due), nil when none: the one
// starting now, or the one its MachineSet records.
func inPlaceForcedAt(in Input, d Decision) *time.Time {
	if d.Action == ActionForce && d.Forced != nil {
		at := d.Forced.At
		return &at
	}
	return rolloutAfterCome(in)
}

// rolloutAfterCome is the MachineDeployment's (or InPlace MachineSet's)
// rollout.after once its time has come, nil otherwise: the last forced
// rollout, which every machine updated before it is due for.
func rolloutAfterCome(in Input) *time.Time {
	if md := in.MachineDeployment; md != nil && md.RolloutAfter != nil && !md.RolloutAfter.After(in.Now) {
		return md.RolloutAfter
	}
	return nil
}

// inPlaceHealthHold is what the health gate holds of an InPlace update:
// the nodes soaking take a slot of maxUnavailable each, and a halt stops
// every node (the reason is said like a Degraded node's).
func inPlaceHealthHold(h *HealthState) (soaking int32, halt string) {
	if h == nil {
		return 0, ""
	}
	switch h.Phase {
	case HealthHalted:
		return 0, fmt.Sprintf("machine %s: %s (health gate)", h.Machine, h.Signal)
	case HealthCanary, HealthSoaking, HealthRolling:
		return int32(len(h.Soaking)), ""
	}
	return 0, ""
}

// soaksAfterFinish reports whether a node finishing its in-place update
// keeps its slot of maxUnavailable: under a health gate it soaks before
// the next node starts (the next reconcile counts it as soaking).
func soaksAfterFinish(h *HealthState) bool {
	if h == nil {
		return false
	}
	switch h.Phase {
	case HealthRollingBack, HealthRolledBack:
		return false
	}
	return h.Settings.CanarySoak > 0 || h.Settings.Soak > 0
}
