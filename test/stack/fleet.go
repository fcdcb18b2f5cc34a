package stack

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// FleetPools is every pool of the fleet rollout with its state now, as
// kubectl nodepool fleet rollout status computes it (the FleetRollout's
// status holds counts only; each pool keeps its own state).
func FleetPools(t testing.TB, c client.Client, fr *nodepoolv1.FleetRollout) []nodepoolv1.FleetRolloutPool {
	t.Helper()
	list := &nodepoolv1.NodePoolList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	pools, errs := fleet.PoolsOf(fr, list.Items, time.Now())
	for _, err := range errs {
		t.Fatal(err)
	}
	return pools
}

// FleetPoolsAgreeing is FleetPools once the pools' own states agree with
// the counts of the FleetRollout's status: the controller writes the
// status first and the pools' states after it, so for a moment after a
// pool is counted done its own state may still say Rolling.
func FleetPoolsAgreeing(t testing.TB, c client.Client, fr *nodepoolv1.FleetRollout) []nodepoolv1.FleetRolloutPool {
	t.Helper()
	var done, skipped int
	for _, w := range fr.Status.Waves {
		done, skipped = done+int(w.Done), skipped+int(w.Skipped)
	}
	return WaitFor(t, time.Minute, "the pools' states to agree with the fleet rollout's counts", func() []nodepoolv1.FleetRolloutPool {
		return FleetPools(t, c, fr)
	}, func(pools []nodepoolv1.FleetRolloutPool) bool {
		d, s := 0, 0
		for _, p := range pools {
			switch p.State {
			case nodepoolv1.FleetPoolDone:
				d++
			case nodepoolv1.FleetPoolSkipped:
				s++
			}
		}
		return d >= done && s >= skipped
	}, func(pools []nodepoolv1.FleetRolloutPool) string {
		out := ""
		for _, p := range pools {
			out += p.Name + "=" + string(p.State) + " "
		}
		return out
	})
}

// FleetSelected is how many pools the fleet rollout selected.
func FleetSelected(fr *nodepoolv1.FleetRollout) int {
	n := 0
	for _, w := range fr.Status.Waves {
		n += int(w.Pools)
	}
	return n
}
