package poolmath

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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
// replicas exactly as Cluster API's MachineDeployment controller does
// (mdutil.ResolveFenceposts, MaxSurge and MaxUnavailable): surge rounds up,
// unavailable down, both 0 means unavailable 1, unavailable is at most the
// replicas and 0 for none. Nil values take the pool defaults. It is written
// here rather than called so that the engine does not import Cluster API's
// controller packages (and their client); a test holds it equal to theirs.
func Fenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	s := ptr.Deref(maxSurge, DefaultMaxSurge)
	u := ptr.Deref(maxUnavailable, DefaultMaxUnavailable)
	up, err := intstr.GetScaledValueFromIntOrPercent(&s, int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	down, err := intstr.GetScaledValueFromIntOrPercent(&u, int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if up == 0 && down == 0 {
		down = 1
	}
	surge, unavailable = int32(up), int32(down)
	switch {
	case desired == 0:
		unavailable = 0
	case unavailable > desired:
		unavailable = desired
	}
	return surge, unavailable, nil
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
