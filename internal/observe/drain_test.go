package observe

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine/drain"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// The message is Cluster API's own (drain.EvictionResult.ConditionMessage),
// so a change of its format in a Cluster API upgrade fails here.
func TestADrainingMachineNamesThePodsAndBudgetsThatHoldItsNode(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
	}
	res := drain.EvictionResult{
		PodsFailedEviction: map[string][]*corev1.Pod{
			"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently": {pod("web-1")},
		},
		PodsDeletionTimestampSet: []*corev1.Pod{pod("slow-1"), pod("slow-2")},
	}
	deleting := func(reason, msg string) clusterv1.Machine {
		now := metav1.Now()
		return clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "m1", DeletionTimestamp: &now},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: "n1"},
				Deletion:   &clusterv1.MachineDeletionStatus{NodeDrainStartTime: start},
				Conditions: []metav1.Condition{{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}},
		}
	}
	got := Drains([]clusterv1.Machine{deleting(clusterv1.MachineDeletingDrainingNodeReason, res.ConditionMessage(start)),
		deleting(clusterv1.MachineDeletingWaitingForVolumeDetachReason, "Waiting for Node volumes to be detached")}, nil)
	if len(got) != 1 || got[0].Node != "n1" || !got[0].Since.Equal(start.Time) {
		t.Fatalf("Drains = %+v, want the draining machine only", got)
	}
	want := []nodepoolv1.DrainBlocker{
		{Pod: "apps/slow-1", Reason: "terminating: its termination grace period has not ended"},
		{Pod: "apps/slow-2", Reason: "terminating: its termination grace period has not ended"},
		{Pod: "apps/web-1", Budget: "web", Reason: "its eviction is refused: disruption budget web needs 2 healthy pods and has 2 currently"},
	}
	if len(got[0].Pods) != len(want) {
		t.Fatalf("pods = %+v, want %+v (message %q)", got[0].Pods, want, got[0].Message)
	}
	for i := range want {
		if got[0].Pods[i] != want[i] {
			t.Errorf("pod %d = %+v, want %+v", i, got[0].Pods[i], want[i])
		}
	}
}

// A drain of a machine on the MachineDeployment's template (a scale-down,
// a repair, a person's delete) is up to date: it belongs to no rollout.
// One of an older template, or made before rollout.after, is a rollout's.
func TestADrainIsUpToDateOnlyOnTheTemplateAndAfterRolloutAfter(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	machine := func(name, ud string, created time.Time) clusterv1.Machine {
		now := metav1.Now()
		return clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now, CreationTimestamp: metav1.NewTime(created)},
			Spec:       clusterv1.MachineSpec{Version: "v1.36.3", Bootstrap: clusterv1.Bootstrap{DataSecretName: &ud}},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: name},
				Deletion:   &clusterv1.MachineDeletionStatus{NodeDrainStartTime: start},
				Conditions: []metav1.Condition{{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.MachineDeletingDrainingNodeReason}}},
		}
	}
	after := start.Add(-time.Hour)
	md := &rollout.MachineDeployment{DataSecretName: "new", Version: "v1.36.3", RolloutAfter: &after}
	got := Drains([]clusterv1.Machine{machine("scaled-down", "new", start.Add(-time.Minute)), machine("old-template", "old", start.Add(-time.Minute)),
		machine("before-rollout-after", "new", start.Add(-2*time.Hour))}, md)
	want := map[string]bool{"scaled-down": true, "old-template": false, "before-rollout-after": false}
	if len(got) != 3 {
		t.Fatalf("Drains = %+v, want 3", got)
	}
	for _, d := range got {
		if d.UpToDate != want[d.Machine] {
			t.Errorf("%s: UpToDate %v, want %v", d.Machine, d.UpToDate, want[d.Machine])
		}
	}
}
