package rollout

import (
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// StrategyInPlace names the strategy of InPlace pools (a Replace pool's is
// its spec.management.replace.strategy).
const StrategyInPlace = "InPlace"

// Strategy is how the pool's machines are replaced, resolved against the
// wanted count: RollingUpdate with maxSurge and maxUnavailable by Cluster
// API's own rule (poolmath.Fenceposts), OnDelete, or InPlace with its
// maxUnavailable. Part of the Decision.
type Strategy struct {
	Name                     string
	MaxSurge, MaxUnavailable int32
	// Health is the health gate's settings (nil without
	// spec.management.health).
	Health *poolmath.HealthSettings
}

// strategyOf resolves the pool's strategy for desired machines.
func strategyOf(spec *nodepoolv1.NodePoolSpec, desired int32) Strategy {
	m := &spec.Management
	s := Strategy{Health: poolmath.Health(m.Health, desired)}
	if m.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		s.Name, s.MaxUnavailable = StrategyInPlace, poolmath.InPlaceMaxUnavailable(m.InPlace.MaxUnavailable, desired)
		return s
	}
	s.Name = string(m.Replace.Strategy)
	if s.Name == "" {
		s.Name = string(nodepoolv1.ReplaceStrategyRollingUpdate)
	}
	if s.Name != string(nodepoolv1.ReplaceStrategyRollingUpdate) {
		return s
	}
	if surge, unavailable, err := poolmath.Fenceposts(m.Replace.RollingUpdate.MaxSurge, m.Replace.RollingUpdate.MaxUnavailable, desired); err == nil {
		s.MaxSurge, s.MaxUnavailable = surge, unavailable
	}
	return s
}

// Rounds is how many rounds of at most maxSurge+maxUnavailable machines
// the decision's rollout replaces its machines in, the health gate's
// canary rounds included: the standing's steps (one count, the one
// status.rollout.steps publishes). A new pool's machines are created at
// once (1), an OnDelete pool's are replaced by a person (0), and a
// decision that rolls nothing has none.
func (d Decision) Rounds() int32 {
	switch {
	case d.Action == ActionCreate:
		return 1
	case !d.Action.Rolls():
		return 0
	case d.Strategy.Name != string(nodepoolv1.ReplaceStrategyRollingUpdate) && d.Strategy.Name != StrategyInPlace:
		return 0
	case d.Standing.Steps != nil:
		return d.Standing.Steps.Rounds
	}
	return poolmath.Steps(d.Machines, d.Strategy.MaxSurge, d.Strategy.MaxUnavailable)
}

// GatedRollout is how the health gate takes a rollout: the canary
// machines, the rounds of the canary and of the rest, and the least time
// the soaks take (poolmath.MinRolloutDuration).
type GatedRollout struct {
	Settings                  poolmath.HealthSettings
	Canary                    int32
	CanaryRounds, LaterRounds int32
	MinDuration               time.Duration
}

// Gated is how the health gate takes the decision's rollout: nil when it
// does not gate it (no health settings, nothing rolls, a new pool's
// machines, or not a Replace RollingUpdate).
func (d Decision) Gated() *GatedRollout {
	s := d.Strategy
	if !d.Action.Rolls() || d.Action == ActionCreate || s.Name != string(nodepoolv1.ReplaceStrategyRollingUpdate) || s.Health == nil {
		return nil
	}
	c, l, total := poolmath.MinRolloutDuration(*s.Health, d.Machines, s.MaxSurge, s.MaxUnavailable)
	return &GatedRollout{Settings: *s.Health, Canary: min(s.Health.Canary, d.Machines), CanaryRounds: c, LaterRounds: l, MinDuration: total}
}
