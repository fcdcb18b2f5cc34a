package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

func TestRolloutAfterInThePastReplacesEveryMachineOnce(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	// Creation times have a resolution of a second: make sure the machines
	// are strictly older than rolloutAfter.
	time.Sleep(2 * time.Second)
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
	st.HoldsFor(t, p, 10*time.Second, "replaced once only", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
	e := st.LastRecord(t, p, string(rollout.InitiatorRestart), history.OutcomeComplete)
	if e.ForcedAt == nil || !e.ForcedAt.Equal(at.Time) {
		t.Errorf("record forcedAt = %v, want %v", e.ForcedAt, at)
	}
}

func TestRolloutAfterInTheFutureWaitsThenReplacesOnce(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	at := metav1.NewTime(time.Now().Add(15 * time.Second).Truncate(time.Second))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	st.WaitForPool(t, p, 10*time.Second, "the forced rollout shown as scheduled", func(s stack.PoolState) bool {
		return stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonRolloutScheduled
	})
	st.HoldsFor(t, p, time.Until(at.Time)-time.Second, "nothing replaced before rolloutAfter", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced after rolloutAfter", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
	st.HoldsFor(t, p, 8*time.Second, "replaced once only", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
	st.LastRecord(t, p, string(rollout.InitiatorRestart), history.OutcomeComplete)
}

func TestAPausedPoolStartsNothingAndCatchesUpWhenThePauseEnds(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	until := time.Now().Add(20 * time.Second).UTC().Truncate(time.Second)
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = until.Format(time.RFC3339) })
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("paused.corp.example") })
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	st.WaitForPool(t, p, 10*time.Second, "the pause reported", func(s stack.PoolState) bool {
		return stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonPaused
	})
	st.HoldsFor(t, p, time.Until(until)-time.Second, "nothing replaced while paused", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
	st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced once the pause ended", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
}

func TestNewNodesPolicyGivesNewNodesTheLatestPayloadAndKeepsTheOld(t *testing.T) {
	p := st.NewPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })
	scale(t, p, 3)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", func(s stack.PoolState) bool {
		return s.Machines.Len() == 3 && s.Nodes == 3 && stack.IsTrue(s.Pool, nodepoolv1.ConditionReady)
	})
	if !after.Machines.IsSuperset(before.Machines) {
		t.Fatal("NewNodes replaced existing machines")
	}
	if after.Payloads[before.OnlyPayload()] != 2 || len(after.Payloads) != 2 {
		t.Errorf("want 2 old nodes on %s and 1 new node on the latest payload; got %v", before.OnlyPayload(), after.Payloads)
	}
}

func TestRolloutPolicyRollsManagementDrift(t *testing.T) {
	p := st.NewPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced on a new payload", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.OnlyPayload() != before.OnlyPayload() &&
			stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	st.HoldsFor(t, p, 8*time.Second, "replaced once only", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
	e := st.LastRecord(t, p, string(rollout.InitiatorPolicy), history.OutcomeComplete)
	if len(e.Changed) == 0 || e.Changed[0] != "apiserver-proxy" {
		t.Errorf("record names changed components %v, want apiserver-proxy", e.Changed)
	}
}

func TestApplyPendingIsRecordedAsPlatformInitiated(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced, drift applied", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0 &&
			stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	h := st.HistoryOf(t, p)
	st.LastRecord(t, p, string(rollout.InitiatorPlatform), history.OutcomeComplete)
	if h[0].Initiator != string(rollout.InitiatorSpec) || h[0].Revision != 1 {
		t.Errorf("the first revision must be the pool's creation (spec): %+v", h[0])
	}
	// status.rollout names the current rollout: the newest record.
	st.WaitForPool(t, p, 30*time.Second, "status.rollout naming the apply-pending's revision", func(s stack.PoolState) bool {
		return s.Pool.Status.Rollout != nil && s.Pool.Status.Rollout.Revision == h[len(h)-1].Revision
	})
}
