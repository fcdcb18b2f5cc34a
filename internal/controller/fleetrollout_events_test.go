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
			if got := fleetFactsChanged(old, cur); got != tc.wake {
				t.Errorf("fleetFactsChanged = %v, want %v", got, tc.wake)
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
