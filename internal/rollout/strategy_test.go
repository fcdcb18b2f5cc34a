package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Moved from internal/cli with the rule it tests: plan words the engine's
// strategy and rounds.
func TestStepsFollowMaxSurgeAndMaxUnavailable(t *testing.T) {
	for _, c := range []struct {
		surge, unavailable *intstr.IntOrString
		replicas           int32
		wantSurge, wantU   int32
		wantSteps          int32
	}{
		{nil, nil, 3, 1, 0, 3},
		{ptr.To(intstr.FromInt32(2)), nil, 3, 2, 0, 2},
		{ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1)), 4, 1, 1, 2},
		{ptr.To(intstr.FromString("25%")), ptr.To(intstr.FromString("25%")), 10, 3, 2, 2},
		{ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromString("10%")), 5, 0, 1, 5},
	} {
		pool := &nodepoolv1.NodePool{}
		pool.Spec.Management.Replace.RollingUpdate = nodepoolv1.RollingUpdate{MaxSurge: c.surge, MaxUnavailable: c.unavailable}
		d := Decision{Action: ActionStart, Machines: c.replicas, Strategy: strategyOf(&pool.Spec, c.replicas)}
		if d.Strategy.MaxSurge != c.wantSurge || d.Strategy.MaxUnavailable != c.wantU || d.Rounds() != c.wantSteps {
			t.Errorf("%v/%v of %d: surge %d, unavailable %d, %d steps; want %d, %d, %d",
				c.surge, c.unavailable, c.replicas, d.Strategy.MaxSurge, d.Strategy.MaxUnavailable, d.Rounds(), c.wantSurge, c.wantU, c.wantSteps)
		}
	}
}

// A new pool's machines are created at once, an OnDelete pool's are
// replaced by a person, and a decision that rolls nothing has no rounds.
func TestRoundsOfNewOnDeleteAndSettledPools(t *testing.T) {
	onDelete := &nodepoolv1.NodePool{}
	onDelete.Spec.Management.Replace.Strategy = nodepoolv1.ReplaceStrategyOnDelete
	rolling := &nodepoolv1.NodePool{}
	for name, c := range map[string]struct {
		d    Decision
		want int32
	}{
		"create":    {Decision{Action: ActionCreate, Machines: 3, Strategy: strategyOf(&rolling.Spec, 3)}, 1},
		"on delete": {Decision{Action: ActionStart, Machines: 3, Strategy: strategyOf(&onDelete.Spec, 3)}, 0},
		"none":      {Decision{Action: ActionNone, Machines: 3, Strategy: strategyOf(&rolling.Spec, 3)}, 0},
	} {
		if got := c.d.Rounds(); got != c.want {
			t.Errorf("%s: %d rounds, want %d", name, got, c.want)
		}
	}
}
