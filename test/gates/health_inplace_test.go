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
)

// healthInPlacePool is an InPlace pool of n machines, one node updated at
// a time, with spec.management.health.
func healthInPlacePool(t *testing.T, n int32, h nodepoolv1.Health) *nodepoolv1.NodePool {
	t.Helper()
	return newPoolWith(t, "workers", n, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
		p.Spec.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		p.Spec.Management.Health = &h
	})
}

func TestInPlaceANodeUnhealthyAfterItsUpdateHaltsTheUpdate(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthInPlacePool(t, 3, nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}})
	before := waitFor(t, p, rolloutTimeout, "3 ready nodes", settled(3))
	old := before.onlyPayload()
	rollOutBadPayload(t, p)
	halted := waitFor(t, p, rolloutTimeout, "RolloutHealthy False, RolloutHalted", func(s state) bool {
		c := condition(s.pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted
	})
	t.Logf("halted: %s", condition(halted.pool, nodepoolv1.ConditionRolloutHealthy).Message)
	holdsFor(t, p, 15*time.Second, "one node on the bad payload, two on the old one, no machine replaced", func(s state) bool {
		return s.machines.Equal(before.machines) && s.payloads[old] == 2 && len(s.payloads) == 2
	})
}

func TestInPlaceRollbackRequestsThePreviousPayloadOnTheUpdatedNodes(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthInPlacePool(t, 2, nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}, FailurePolicy: nodepoolv1.FailurePolicyRollback})
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	rollOutBadPayload(t, p)
	waitFor(t, p, rolloutTimeout, "a node on the bad payload", func(s state) bool { return len(s.payloads) == 2 })
	after := waitFor(t, p, 2*rolloutTimeout, "every node back on the previous payload", func(s state) bool {
		c := condition(s.pool, nodepoolv1.ConditionRolloutHealthy)
		return settled(2)(s) && s.onlyPayload() == before.onlyPayload() && c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted
	})
	if !after.machines.Equal(before.machines) {
		t.Error("the in-place rollback replaced machines")
	}
	entries := historyOf(t, p)
	if n := len(entries); n != 3 || entries[1].Outcome != history.OutcomeFailed || entries[2].Initiator != string(rollout.InitiatorRollback) || entries[2].RollbackOf != entries[1].Revision {
		t.Errorf("history %+v, want create, the failed rollout, its rollback", entries)
	}
}
