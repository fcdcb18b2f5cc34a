package drain

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/stack"
)

// The controller drains an InPlace node itself through the Eviction API;
// with onTimeout Force it updates the node anyway after the timeout.
func TestAnInPlaceDrainBlockedByABudgetIsForcedAfterTheTimeout(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded", func(p *nodepoolv1.NodePool) { inPlace(p); policy(nodepoolv1.DrainForce, drainTimeout)(p) })
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	changeChrony(t, p, "inplace-force.corp.example")
	st.WaitForPool(t, p, stack.RolloutTimeout, "the drain reported blocked by the guarded pod", func(s stack.PoolState) bool {
		return len(s.Pool.Status.Drains) == 1 && len(s.Pool.Status.Drains[0].Pods) == 1 && s.Pool.Status.Drains[0].Pods[0].Budget == sim.GuardedBudget
	})
	st.WaitForPool(t, p, stack.RolloutTimeout+drainTimeout, "the node updated anyway after the timeout", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && len(s.Pool.Status.Drains) == 0 && s.Pool.Status.Updating == ""
	})
	if got := events(t, p, nodepoolv1.EventDrainTimedOut); len(got) == 0 {
		t.Errorf("no DrainTimedOut event")
	}
}

// With onTimeout Halt an InPlace rollout halts: the node stays cordoned
// with its pod, RolloutHealthy names the pod and budget.
func TestAnInPlaceDrainBlockedByABudgetHaltsTheRolloutAndKeepsThePod(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded", func(p *nodepoolv1.NodePool) { inPlace(p); policy(nodepoolv1.DrainHalt, drainTimeout)(p) })
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	m := machines(t, p)[0]
	guarded := m.Spec.InfrastructureRef.Name + "-guarded"
	changeChrony(t, p, "inplace-halt.corp.example")
	s := st.WaitForPool(t, p, stack.RolloutTimeout+drainTimeout, "the rollout halted on the drain", func(s stack.PoolState) bool {
		c := meta.FindStatusCondition(s.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
		return c != nil && c.Status == "False" && c.Reason == nodepoolv1.ReasonDrainHalted
	})
	if c := meta.FindStatusCondition(s.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); !strings.Contains(c.Message, p.Namespace+"/"+guarded) || !strings.Contains(c.Message, sim.GuardedBudget) {
		t.Errorf("RolloutHealthy says %q, want the pod and budget named", c.Message)
	}
	st.HoldsFor(t, p, 5*time.Second, "the guarded pod kept on its node", func(stack.PoolState) bool {
		pod, ok := pods(t, p.Namespace)[guarded]
		return ok && pod.DeletionTimestamp == nil
	})
}
