package fleet

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// FactsChanged reports whether a pool's update changes what a fleet
// rollout reads of it: Observe (its annotations of requests and
// fleet rollouts, the parts of its status and conditions a wave waits
// on), its pause, and its kept states in fleet rollouts. A pool's own
// rollout patches its status many times (machine counts, conditions'
// messages and times, nodes, drains); none of those wakes a fleet
// rollout.
func FactsChanged(old, cur *nodepoolv1.NodePool) bool {
	if old.Generation != cur.Generation || old.Spec.Management.PausedUntil != cur.Spec.Management.PausedUntil ||
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
		return true
	}
	for _, k := range []string{nodepoolv1.AnnotationApplyPending, nodepoolv1.AnnotationFleetRollout, nodepoolv1.AnnotationOutsideWindowsAt, nodepoolv1.AnnotationOutsideWindowsReason} {
		if old.Annotations[k] != cur.Annotations[k] {
			return true
		}
	}
	a, b := RolloutsOf(old), RolloutsOf(cur)
	if len(a) != len(b) {
		return true
	}
	for _, name := range a {
		k := nodepoolv1.FleetRolloutPoolAnnotation(name)
		if old.Annotations[k] != cur.Annotations[k] {
			return true
		}
	}
	var never time.Time
	return !equality.Semantic.DeepEqual(Observe(old, never), Observe(cur, never))
}

// fleetBatch is how long pool and history events wait before the fleet
// rollouts they map to are reconciled, at least: the events of that time
// (a wave's pools patched at once, each pool's records) wake a rollout
// once, so its reconciles follow the rollout's time, not its pools'
// events. A reconcile looks at every member (fleet.Decide, a few µs a
// pool), so a rollout of more than fleetBatch/fleetBatchPerPool pools
// waits fleetBatchPerPool a member, up to maxFleetBatch: its reconciles
// are then fewer as it is larger, and the CPU they take a pool does not
// grow with the fleet (BenchmarkFleetRolloutReconcile).
const (
	fleetBatch        = time.Second
	fleetBatchPerPool = time.Millisecond
	maxFleetBatch     = 10 * time.Second
)

// Batch is how long the pool and history events of a fleet rollout of
// that many members wait before it is reconciled: fleetBatch, or
// fleetBatchPerPool a member, up to maxFleetBatch. The controller batches
// its watch events by it, and the scenario model wakes its fleet
// rollouts after it.
func Batch(members int) time.Duration {
	return min(maxFleetBatch, max(fleetBatch, time.Duration(members)*fleetBatchPerPool))
}
