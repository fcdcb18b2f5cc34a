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

// FleetSelected is how many pools the fleet rollout selected.
func FleetSelected(fr *nodepoolv1.FleetRollout) int {
	n := 0
	for _, w := range fr.Status.Waves {
		n += int(w.Pools)
	}
	return n
}
