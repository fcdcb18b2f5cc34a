package drain

import (
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// Cluster API counts a Machine it is deleting in its MachineSet until the
// Machine is gone, and a MachineDeployment surges only up to replicas +
// maxSurge of those. So while one old node of a 2-machine pool cannot be
// drained, the rollout stops where it is: one new machine, the other old
// machine untouched and serving, the pool not settled. Once the budget
// allows the eviction the rollout goes on and ends with 2 new machines.
func TestATwoMachineReplaceRolloutStopsWhileAnOldNodeCannotBeDrained(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 2, "guarded", policy(nodepoolv1.DrainWait, drainTimeout))
	st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	old := map[string]bool{}
	for _, m := range machines(t, p) {
		old[m.Name] = true
	}

	changeChrony(t, p, "surge.corp.example")
	st.WaitForPool(t, p, stack.RolloutTimeout, "an old machine's drain blocked by the budget", func(s stack.PoolState) bool {
		for _, d := range s.Pool.Status.Drains {
			if old[d.Machine] && len(d.Pods) == 1 && d.Pods[0].Budget != "" {
				return true
			}
		}
		return false
	})
	// stopped describes the pool while the drain holds: 3 machines (the
	// one surge machine, the draining one, the other old one not deleting)
	// and the pool not settled.
	stopped := func(stack.PoolState) bool {
		ms := machines(t, p)
		var fresh, deleting, serving int
		for _, m := range ms {
			switch {
			case !old[m.Name]:
				fresh++
			case m.DeletionTimestamp != nil:
				deleting++
			default:
				serving++
			}
		}
		return len(ms) == 3 && fresh == 1 && deleting == 1 && serving == 1
	}
	st.WaitForPool(t, p, time.Minute, "one surge machine, one old machine draining, one old machine serving", stopped)
	st.HoldsFor(t, p, 10*time.Second, "the rollout stopped on the drain", func(s stack.PoolState) bool {
		return stopped(s) && !stack.Settled(s.Pool, 2)
	})

	releaseBudget(t, p.Namespace)
	st.WaitForPool(t, p, 2*stack.RolloutTimeout, "2 new machines once the budget allows evictions", func(s stack.PoolState) bool {
		for _, m := range machines(t, p) {
			if old[m.Name] {
				return false
			}
		}
		return stack.PoolSettled(2)(s) && len(s.Pool.Status.Drains) == 0
	})
}
