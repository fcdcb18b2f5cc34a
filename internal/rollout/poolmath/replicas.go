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
	if a := Autoscaled(spec); a != nil {
		r := ptr.Deref(current, a.Min)
		return min(max(r, a.Min), a.Max)
	}
	return ptr.Deref(spec.Replicas, 0)
}

// Autoscaled is the autoscaler's bounds of an autoscaled pool (one
// without spec.replicas), a copy; nil for a pool of fixed size.
func Autoscaled(spec *nodepoolv1.NodePoolSpec) *nodepoolv1.AutoScaling {
	if spec.Replicas != nil || spec.AutoScaling == nil {
		return nil
	}
	a := *spec.AutoScaling
	return &a
}
