package poolmath

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"
)

// Defaults of a Replace pool's RollingUpdate, written to its
// MachineDeployment when the pool leaves them unset.
var (
	DefaultMaxSurge       = intstr.FromInt32(1)
	DefaultMaxUnavailable = intstr.FromInt32(0)
	// DefaultInPlaceMaxUnavailable is an InPlace pool's default.
	DefaultInPlaceMaxUnavailable = intstr.FromInt32(1)
)

// Fenceposts resolves maxSurge and maxUnavailable against the desired
// replicas exactly as Cluster API's MachineDeployment controller does: by
// its own functions, on a MachineDeployment of that strategy (surge rounds
// up, unavailable down, both 0 means unavailable 1, unavailable is at most
// the replicas and 0 for none). Nil values take the pool defaults.
func Fenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	s := ptr.Deref(maxSurge, DefaultMaxSurge)
	u := ptr.Deref(maxUnavailable, DefaultMaxUnavailable)
	if _, _, err := mdutil.ResolveFenceposts(&s, &u, desired); err != nil {
		return 0, 0, err
	}
	md := clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Replicas: &desired,
		Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
			Type:          clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &s, MaxUnavailable: &u},
		}}}}
	return mdutil.MaxSurge(md), mdutil.MaxUnavailable(md), nil
}

// Steps is how many rounds a rolling replacement of machines takes when
// each round replaces at most surge+unavailable of them.
func Steps(machines, surge, unavailable int32) int32 {
	per := surge + unavailable
	if machines <= 0 || per <= 0 {
		return 0
	}
	return (machines + per - 1) / per
}

// InPlaceMaxUnavailable resolves an InPlace pool's maxUnavailable against
// the desired replicas, rounding down, and never below 1.
func InPlaceMaxUnavailable(v *intstr.IntOrString, desired int32) int32 {
	val := ptr.Deref(v, DefaultInPlaceMaxUnavailable)
	n, err := intstr.GetScaledValueFromIntOrPercent(&val, int(desired), false)
	if err != nil || n < 1 {
		return 1
	}
	return int32(n)
}

// InPlaceStarts is how many more node updates may start: maxUnavailable
// less the nodes in an update phase (busy) and the nodes unavailable for
// another reason (NotReady or cordoned), never below 0.
func InPlaceStarts(maxUnavailable, busy, unavailable int32) int32 {
	return max(maxUnavailable-busy-unavailable, 0)
}
