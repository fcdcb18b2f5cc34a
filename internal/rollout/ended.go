package rollout

import (
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// A halt or a rollback is a fact about one rollout and ends with it. The
// rollout's record keeps them (AnnotationHalted, AnnotationDrainHalted,
// AnnotationRolledBack; record.go), and a new rollout starts a new record.
// Their values name the rollout's hash too: a record whose rollout the
// pool's target no longer is (the owner changed the pool while it was
// current) says nothing about the pool any more. A drain halt also ends
// when no rollout is in progress: a drain then belongs to no rollout (a
// scale-down, a repair, a person's delete) and never halts or pauses the
// pool: the drain halt of a rollout with no old machine left and whose
// halted drain is over ends.

// endRecords clears what the current record keeps about halts and
// rollbacks that ended. Nothing is cleared while the inputs cannot be
// rendered: what they ask for is not known.
func endRecords(in Input, d Decision, p *Plan) {
	if in.RenderErr != nil || in.Latest == nil || d.Target == nil {
		return
	}
	target := d.Target.RolloutHash
	clear := func(key string) {
		if _, set := p.recordedValue(key); !set && recorded(in, key) != "" {
			p.record(key, "")
		}
	}
	if v := recorded(in, nodepoolv1.AnnotationHalted); v != "" {
		if r, _, _ := strings.Cut(v, "/"); r != target {
			clear(nodepoolv1.AnnotationHalted)
		}
	}
	if v := recorded(in, nodepoolv1.AnnotationDrainHalted); v != "" {
		r, machine, _ := strings.Cut(strings.TrimSuffix(v, drainResumed), "/")
		if r != target || !rolling(in, d) && !draining(in, machine) {
			clear(nodepoolv1.AnnotationDrainHalted)
		}
	}
	if v := recorded(in, nodepoolv1.AnnotationRolledBack); v != "" && v != in.Hashes.Rollout {
		clear(nodepoolv1.AnnotationRolledBack)
	}
}

// draining reports whether machine's node is being drained.
func draining(in Input, machine string) bool {
	for _, d := range in.Drains {
		if d.Machine == machine {
			return true
		}
	}
	return false
}

// rolling reports whether a rollout is in progress or starts now: the
// drains Cluster API makes then belong to it. A scale-down of a settled
// pool is not one (its MachineDeployment is not complete, yet every
// machine runs the target).
func rolling(in Input, d Decision) bool {
	if d.Action == ActionStart || d.Action == ActionForce || forcedInProgress(in.MachineDeployment) {
		return true
	}
	md, running, target := in.MachineDeployment, d.Running, d.Target
	if md == nil || running == nil || target == nil {
		return false
	}
	// Machines not being deleted that are not up to date: old ones left.
	return running.Name != target.Name || md.UpToDateReplicas < int32(len(md.MachinesCreated))
}
