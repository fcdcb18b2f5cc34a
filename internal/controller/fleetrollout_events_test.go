package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// A pool's update wakes the fleet rollouts it belongs to only when it
// changes what they read of it: its own rollout's many status patches
// (machine counts, other conditions, their messages and times) do not;
// its kept state, a request, its standing, a condition a wave waits on,
// its pause and its deletion do.
func TestOnlyWhatAFleetRolloutReadsOfAPoolWakesIt(t *testing.T) {
	base := func() *nodepoolv1.NodePool {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "workers", Generation: 2,
			Annotations: map[string]string{nodepoolv1.FleetRolloutPoolAnnotation("proxy-fix"): `{"wave":1,"state":"Rolling"}`}}}
		p.Status = nodepoolv1.NodePoolStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 1, Updating: "Forced",
			Rollout: &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseRolling}}
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nodepoolv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AsExpected"})
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nodepoolv1.ConditionAllMachinesReady, Status: metav1.ConditionTrue, Reason: "AsExpected", Message: "3 of 3 machines ready"})
		return p
	}
	for _, tc := range []struct {
		name string
		edit func(p *nodepoolv1.NodePool)
		wake bool
	}{
		{"nothing", func(*nodepoolv1.NodePool) {}, false},
		{"machine counts", func(p *nodepoolv1.NodePool) { p.Status.UpdatedReplicas, p.Status.ReadyReplicas = 2, 2 }, false},
		{"another condition's message", func(p *nodepoolv1.NodePool) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nodepoolv1.ConditionAllMachinesReady, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "2 of 3 machines ready"})
		}, false},
		{"nodes", func(p *nodepoolv1.NodePool) { p.Status.Nodes = []nodepoolv1.NodePayloadCount{{Count: 2}} }, false},
		{"its kept state", func(p *nodepoolv1.NodePool) {
			p.Annotations[nodepoolv1.FleetRolloutPoolAnnotation("proxy-fix")] = `{"wave":1,"state":"Done"}`
		}, true},
		{"a kept state in another fleet rollout", func(p *nodepoolv1.NodePool) {
			p.Annotations[nodepoolv1.FleetRolloutPoolAnnotation("other")] = `{"wave":2,"state":"Pending"}`
		}, true},
		{"an apply-pending", func(p *nodepoolv1.NodePool) {
			p.Annotations[nodepoolv1.AnnotationApplyPending] = "2026-12-01T10:00:00Z"
		}, true},
		{"its rollout settles", func(p *nodepoolv1.NodePool) {
			p.Status.Updating, p.Status.Rollout = "", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true}
		}, true},
		{"its replicas", func(p *nodepoolv1.NodePool) { p.Status.Replicas = 4 }, true},
		{"its health gate fails", func(p *nodepoolv1.NodePool) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse, Reason: "Halted", Message: "1 machine unhealthy"})
			p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Message: "1 machine unhealthy"}
		}, true},
		{"not ready", func(p *nodepoolv1.NodePool) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nodepoolv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Halted"})
		}, true},
		{"paused", func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = "true" }, true},
		{"deleted", func(p *nodepoolv1.NodePool) { now := metav1.Now(); p.DeletionTimestamp = &now }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.edit(cur)
			if got := fleet.FactsChanged(old, cur); got != tc.wake {
				t.Errorf("fleet.FactsChanged = %v, want %v", got, tc.wake)
			}
		})
	}
}

// A member's record of its trigger is read once and kept until one of
// the pool's history records changes (or the pool is another with the
// same name, or the trigger another): a reconcile does not read the
// history of every pool under way.
func TestAMembersRecordIsKeptUntilItsHistoryChanges(t *testing.T) {
	var r records
	ref := fleet.Ref{Namespace: "a", Name: "workers"}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, ok, _ := r.get(ref, "uid-1", at); ok {
		t.Fatal("a record kept before any was read")
	}
	_, _, v := r.get(ref, "uid-1", at)
	rec := &fleet.Record{Revision: 4, Outcome: "InProgress"}
	r.keep(ref, "uid-1", at, v, rec)
	if got, ok, _ := r.get(ref, "uid-1", at); !ok || got != rec {
		t.Fatalf("kept %v %v, want the record read", got, ok)
	}
	for _, tc := range []struct {
		name string
		uid  string
		at   time.Time
	}{{"another pool of that name", "uid-2", at}, {"another trigger", "uid-1", at.Add(time.Hour)}} {
		if _, ok, _ := r.get(ref, types.UID(tc.uid), tc.at); ok {
			t.Errorf("%s: the kept record is given", tc.name)
		}
	}
	r.changed(fleet.Ref{Namespace: "a", Name: "other"})
	if _, ok, _ := r.get(ref, "uid-1", at); !ok {
		t.Error("another pool's history changed: the record is read again")
	}
	r.changed(ref)
	if _, ok, _ := r.get(ref, "uid-1", at); ok {
		t.Error("the pool's history changed: the kept record is still given")
	}
}

// A reconcile decodes a member's kept state only when its annotation
// changed since the last one; a state that cannot be read is reported at
// every reconcile; a pool no longer a member is forgotten.
func TestAMembersKeptStateIsDecodedAgainOnlyWhenItChanged(t *testing.T) {
	var s states
	a, b := fleet.Ref{Namespace: "n", Name: "a"}, fleet.Ref{Namespace: "n", Name: "b"}
	k := s.of("r")
	m, ok, err := k.decode(a, `{"wave":1,"state":"Pending"}`)
	if !ok || err != nil || m.State != nodepoolv1.FleetPoolPending || m.Name != "a" {
		t.Fatalf("decoded %+v, %v, %v", m, ok, err)
	}
	if _, ok, err := k.decode(b, `{"wave":0}`); ok || err == nil {
		t.Fatalf("an unreadable state: %v, %v", ok, err)
	}
	k.sweep()
	first := k.byRef[a]

	k = s.of("r")
	if m, ok, _ := k.decode(a, `{"wave":1,"state":"Pending"}`); !ok || k.byRef[a] != first || m.State != nodepoolv1.FleetPoolPending {
		t.Fatalf("the same annotation decoded again: %+v", m)
	}
	if _, ok, err := k.decode(b, `{"wave":0}`); ok || err == nil {
		t.Fatalf("an unreadable state is reported once only: %v, %v", ok, err)
	}
	k.sweep()

	k = s.of("r")
	if m, ok, _ := k.decode(a, `{"wave":1,"state":"Rolling","triggeredAt":"2026-12-05T10:00:00Z"}`); !ok || m.State != nodepoolv1.FleetPoolRolling || m.TriggeredAt == nil {
		t.Fatalf("a changed annotation: %+v", m)
	}
	k.sweep()
	if _, kept := k.byRef[b]; kept || len(k.byRef) != 1 {
		t.Fatalf("a pool no longer a member is kept: %v", k.byRef)
	}
	s.forget("r")
	if s.of("r").byRef[a] != nil {
		t.Fatal("a forgotten rollout's states are kept")
	}
}

// A fleet rollout's events are batched over a second, and over 1 ms a
// member beyond 1,000 members, up to 10 s: its reconciles, each reading
// every member, are fewer as it is larger.
func TestAFleetRolloutsEventsAreBatchedLongerAsItIsLarger(t *testing.T) {
	for members, want := range map[int]time.Duration{0: time.Second, 300: time.Second, 1000: time.Second, 3000: 3 * time.Second, 10000: 10 * time.Second, 50000: 10 * time.Second} {
		if got := fleet.Batch(members); got != want {
			t.Errorf("%d members: %s, want %s", members, got, want)
		}
	}
	var r FleetRolloutReconciler
	r.sizes.Store("big", 5000)
	if got := r.batchFor("big"); got != 5*time.Second {
		t.Errorf("batchFor: %s", got)
	}
	if got := r.batchFor("unknown"); got != time.Second {
		t.Errorf("batchFor of a rollout not reconciled yet: %s", got)
	}
}
