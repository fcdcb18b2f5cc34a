package poolmath

import (
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// DesiredReplicas is how many machines the pool wants: spec.replicas, or,
// for an autoscaled pool, the current replicas of its MachineDeployment
// (or MachineSet) kept within autoScaling's bounds (the autoscaler owns
// the count; a new pool starts at min; a count outside new bounds is
// clamped into them). current is nil when the MachineDeployment does not
// exist yet. Scaling is not a rollout: it applies while the pool is paused.
func DesiredReplicas(spec *nodepoolv1.NodePoolSpec, current *int32) int32 {
	if a := spec.AutoScaling; a != nil && spec.Replicas == nil {
		r := ptr.Deref(current, a.Min)
		return min(max(r, a.Min), a.Max)
	}
	return ptr.Deref(spec.Replicas, 0)
}
