package history

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func TestRolloutsAreTheNewestFinishedRolloutsWithoutTheCreation(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	old := nodepoolv1.NodePoolSpec{Replicas: ptr.To(int32(4))} // surge 1: 4 rounds
	var crs []appsv1.ControllerRevision
	for i, rec := range []struct {
		took    time.Duration
		outcome string
		shape   poolmath.Shape
	}{
		{time.Hour, OutcomeComplete, poolmath.Shape{Machines: 3, Rounds: 3}}, // the creation
		{10 * time.Minute, OutcomeComplete, poolmath.Shape{}},                // an old record: its spec says
		{20 * time.Minute, OutcomeSuperseded, poolmath.Shape{Machines: 3, Rounds: 3}},
		{0, OutcomeInProgress, poolmath.Shape{Machines: 3, Rounds: 3}},
		{25 * time.Minute, OutcomeFailed, poolmath.Shape{Machines: 3, Rounds: 3, Soak: 5 * time.Minute}},
		{30 * time.Minute, OutcomeComplete, poolmath.Shape{Machines: 30, Rounds: 10, Soak: 9 * time.Minute}},
	} {
		e := Entry{Revision: int64(i + 1), Initiator: "spec", Started: t0, Spec: old, Machines: rec.shape.Machines, Rounds: rec.shape.Rounds}
		if rec.shape.Soak > 0 {
			e.Soak = &metav1.Duration{Duration: rec.shape.Soak}
		}
		cr, err := New("ns", "workers", e)
		if err != nil {
			t.Fatal(err)
		}
		if rec.took > 0 {
			cr.Annotations[AnnotationOutcome] = rec.outcome
			cr.Annotations[AnnotationCompleted] = t0.Add(rec.took).Format(time.RFC3339)
		}
		crs = append(crs, *cr)
	}
	got := Rollouts(crs, 2)
	want := []poolmath.PastRollout{
		{Shape: poolmath.Shape{Machines: 30, Rounds: 10, Soak: 9 * time.Minute}, Took: 30 * time.Minute, Complete: true},
		{Shape: poolmath.Shape{Machines: 3, Rounds: 3, Soak: 5 * time.Minute}, Took: 25 * time.Minute, Failed: true},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Rollouts = %+v, want %+v (newest first, in progress left out)", got, want)
	}
	all := Rollouts(crs, 10)
	if len(all) != 4 {
		t.Fatalf("Rollouts = %+v, want 4 (revision 1 is the creation, revision 4 is in progress)", all)
	}
	if s := all[2]; s.Complete || s.Failed || s.Took != 20*time.Minute {
		t.Errorf("the superseded rollout reads %+v", s)
	}
	if o := all[3]; o.Shape != (poolmath.Shape{Machines: 4, Rounds: 4}) || !o.Complete {
		t.Errorf("a record without machines and rounds reads %+v, want its spec's 4 machines in 4 rounds", o)
	}
}
