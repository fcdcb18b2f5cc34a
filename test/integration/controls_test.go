package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

// historyOf returns the pool's rollout records, oldest first.
func historyOf(t *testing.T, p *nodepoolv1.NodePool) []history.Entry {
	t.Helper()
	list := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	history.Sort(list.Items)
	var out []history.Entry
	for i := range list.Items {
		e, err := history.Decode(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// lastRecord waits for the newest record to have initiator and outcome.
func lastRecord(t *testing.T, p *nodepoolv1.NodePool, initiator, outcome string) history.Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var h []history.Entry
	for time.Now().Before(deadline) {
		h = historyOf(t, p)
		if n := len(h); n > 0 && h[n-1].Initiator == initiator && h[n-1].Outcome == outcome {
			return h[n-1]
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("history does not end with a %s rollout %s: %+v", initiator, outcome, h)
	return history.Entry{}
}

func TestRolloutAfterInThePastReplacesEveryMachineOnce(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	// Creation times have a resolution of a second: make sure the machines
	// are strictly older than rolloutAfter.
	time.Sleep(2 * time.Second)
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	after := waitFor(t, p, rolloutTimeout, "every machine replaced", func(s state) bool {
		return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0
	})
	holdsFor(t, p, 10*time.Second, "replaced once only", func(s state) bool { return s.machines.Equal(after.machines) })
	e := lastRecord(t, p, string(rollout.InitiatorRestart), history.OutcomeComplete)
	if e.ForcedAt == nil || !e.ForcedAt.Equal(at.Time) {
		t.Errorf("record forcedAt = %v, want %v", e.ForcedAt, at)
	}
}

func TestRolloutAfterInTheFutureWaitsThenReplacesOnce(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	at := metav1.NewTime(time.Now().Add(15 * time.Second).Truncate(time.Second))
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	waitFor(t, p, 10*time.Second, "the forced rollout shown as scheduled", func(s state) bool {
		return condition(s.pool, nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonRolloutScheduled
	})
	holdsFor(t, p, time.Until(at.Time)-time.Second, "nothing replaced before rolloutAfter", func(s state) bool { return s.machines.Equal(before.machines) })
	after := waitFor(t, p, rolloutTimeout, "every machine replaced after rolloutAfter", func(s state) bool {
		return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0
	})
	holdsFor(t, p, 8*time.Second, "replaced once only", func(s state) bool { return s.machines.Equal(after.machines) })
	lastRecord(t, p, string(rollout.InitiatorRestart), history.OutcomeComplete)
}

func TestAPausedPoolStartsNothingAndCatchesUpWhenThePauseEnds(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	until := time.Now().Add(20 * time.Second).UTC().Truncate(time.Second)
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = until.Format(time.RFC3339) })
	update(t, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("paused.corp.example") })
	at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	waitFor(t, p, 10*time.Second, "the pause reported", func(s state) bool {
		return condition(s.pool, nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonPaused
	})
	holdsFor(t, p, time.Until(until)-time.Second, "nothing replaced while paused", func(s state) bool { return s.machines.Equal(before.machines) })
	waitFor(t, p, rolloutTimeout, "every machine replaced once the pause ended", func(s state) bool {
		return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0
	})
}

func TestNewNodesPolicyGivesNewNodesTheLatestPayloadAndKeepsTheOld(t *testing.T) {
	p := newPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
	})
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	setManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + freshDigest() + "\n"
	})
	waitFor(t, p, 30*time.Second, "drift reported", func(s state) bool { return isTrue(s.pool, nodepoolv1.ConditionConfigUpdatePending) })
	scale(t, p, 3)
	after := waitFor(t, p, rolloutTimeout, "3 ready nodes", func(s state) bool {
		return s.machines.Len() == 3 && s.nodes == 3 && isTrue(s.pool, nodepoolv1.ConditionReady)
	})
	if !after.machines.IsSuperset(before.machines) {
		t.Fatal("NewNodes replaced existing machines")
	}
	if after.payloads[before.onlyPayload()] != 2 || len(after.payloads) != 2 {
		t.Errorf("want 2 old nodes on %s and 1 new node on the latest payload; got %v", before.onlyPayload(), after.payloads)
	}
}

func TestRolloutPolicyRollsManagementDrift(t *testing.T) {
	p := newPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	})
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	setManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + freshDigest() + "\n"
	})
	after := waitFor(t, p, rolloutTimeout, "every machine replaced on a new payload", func(s state) bool {
		return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0 && s.onlyPayload() != before.onlyPayload() &&
			condition(s.pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	holdsFor(t, p, 8*time.Second, "replaced once only", func(s state) bool { return s.machines.Equal(after.machines) })
	e := lastRecord(t, p, string(rollout.InitiatorPolicy), history.OutcomeComplete)
	if len(e.Changed) == 0 || e.Changed[0] != "apiserver-proxy" {
		t.Errorf("record names changed components %v, want apiserver-proxy", e.Changed)
	}
}

func TestApplyPendingIsRecordedAsPlatformInitiated(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	setManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + freshDigest() + "\n"
	})
	waitFor(t, p, 30*time.Second, "drift reported", func(s state) bool { return isTrue(s.pool, nodepoolv1.ConditionConfigUpdatePending) })
	update(t, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[rollout.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	waitFor(t, p, rolloutTimeout, "every machine replaced, drift applied", func(s state) bool {
		return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0 &&
			condition(s.pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	h := historyOf(t, p)
	lastRecord(t, p, string(rollout.InitiatorPlatform), history.OutcomeComplete)
	if h[0].Initiator != string(rollout.InitiatorSpec) || h[0].Revision != 1 {
		t.Errorf("the first revision must be the pool's creation (spec): %+v", h[0])
	}
}
