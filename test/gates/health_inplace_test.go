package gates

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

// healthInPlacePool is an InPlace pool of n machines, one node updated at
// a time, with spec.management.health.
func healthInPlacePool(t *testing.T, n int32, h nodepoolv1.Health) *nodepoolv1.NodePool {
	t.Helper()
	return st.NewPoolWith(t, "workers", n, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
		p.Spec.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		p.Spec.Management.Health = &h
	})
}

func TestInPlaceANodeUnhealthyAfterItsUpdateHaltsTheUpdate(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthInPlacePool(t, 3, nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	old := before.OnlyPayload()
	rollOutBadPayload(t, p)
	halted := st.WaitForPool(t, p, stack.RolloutTimeout, "RolloutHealthy False, RolloutHalted", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted
	})
	t.Logf("halted: %s", stack.Condition(halted.Pool, nodepoolv1.ConditionRolloutHealthy).Message)
	st.HoldsFor(t, p, 15*time.Second, "one node on the bad payload, two on the old one, no machine replaced", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines) && s.Payloads[old] == 2 && len(s.Payloads) == 2
	})
}

func TestInPlaceRollbackRequestsThePreviousPayloadOnTheUpdatedNodes(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthInPlacePool(t, 2, nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}, FailurePolicy: nodepoolv1.FailurePolicyRollback})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	rollOutBadPayload(t, p)
	st.WaitForPool(t, p, stack.RolloutTimeout, "a node on the bad payload", func(s stack.PoolState) bool { return len(s.Payloads) == 2 })
	after := st.WaitForPool(t, p, 2*stack.RolloutTimeout, "every node back on the previous payload", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return stack.PoolSettled(2)(s) && s.OnlyPayload() == before.OnlyPayload() && c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted
	})
	if !after.Machines.Equal(before.Machines) {
		t.Error("the in-place rollback replaced machines")
	}
	entries := st.HistoryOf(t, p)
	if n := len(entries); n != 3 || entries[1].Outcome != history.OutcomeFailed || entries[2].Initiator != string(rollout.InitiatorRollback) || entries[2].RollbackOf != entries[1].Revision {
		t.Errorf("history %+v, want create, the failed rollout, its rollback", entries)
	}
}
