package poolmath

import (
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Defaults of spec.management.health.
var (
	DefaultCanary           = intstr.FromInt32(1)
	DefaultCanarySoak       = 5 * time.Minute
	DefaultSoak             = time.Duration(0)
	DefaultProgressDeadline = 15 * time.Minute
)

// HealthSettings are a pool's health gate settings with defaults applied.
type HealthSettings struct {
	// Canary is how many machines of a rollout go first (at least 1).
	Canary                             int32
	CanarySoak, Soak, ProgressDeadline time.Duration
	Policy                             nodepoolv1.FailurePolicy
}

// Health resolves spec.management.health against the desired replicas: a
// percentage canary rounds up and is never below one machine nor above the
// pool's size (when it has machines). Nil when the pool has no health gate.
func Health(h *nodepoolv1.Health, desired int32) *HealthSettings {
	if h == nil {
		return nil
	}
	s := &HealthSettings{CanarySoak: DefaultCanarySoak, Soak: DefaultSoak, ProgressDeadline: DefaultProgressDeadline, Policy: h.FailurePolicy}
	if s.Policy == "" {
		s.Policy = nodepoolv1.FailurePolicyHalt
	}
	if h.CanarySoak != nil {
		s.CanarySoak = h.CanarySoak.Duration
	}
	if h.Soak != nil {
		s.Soak = h.Soak.Duration
	}
	if h.ProgressDeadline != nil && h.ProgressDeadline.Duration > 0 {
		s.ProgressDeadline = h.ProgressDeadline.Duration
	}
	c := ptr.Deref(h.Canary, DefaultCanary)
	n, err := intstr.GetScaledValueFromIntOrPercent(&c, int(desired), true)
	if err != nil || n < 1 {
		n = 1
	}
	if desired > 0 && int32(n) > desired {
		n = int(desired)
	}
	s.Canary = int32(n)
	return s
}

// MinRolloutDuration is the least time a gated rolling replacement of
// machines takes: the canary machines are one round (while they are on
// trial the surge is the canary and nothing is taken down) soaking
// canarySoak, then each later round of at most surge+unavailable machines
// soaks soak. With surge 1 and unavailable 0, each later machine is a
// round of its own.
func MinRolloutDuration(s HealthSettings, machines, surge, unavailable int32) (canaryRounds, laterRounds int32, total time.Duration) {
	if machines <= 0 {
		return 0, 0, 0
	}
	canary := min(s.Canary, machines)
	canaryRounds = Steps(canary, canary, 0)
	laterRounds = Steps(machines-canary, surge, unavailable)
	return canaryRounds, laterRounds, time.Duration(canaryRounds)*s.CanarySoak + time.Duration(laterRounds)*s.Soak
}
