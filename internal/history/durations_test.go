package history

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

func TestDurationsAreTheNewestCompletedRolloutsWithoutTheCreation(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var crs []appsv1.ControllerRevision
	for i, took := range []time.Duration{time.Hour, 10 * time.Minute, 20 * time.Minute, 0, 30 * time.Minute} {
		cr, err := New("ns", "workers", Entry{Revision: int64(i + 1), Initiator: "spec", Started: t0})
		if err != nil {
			t.Fatal(err)
		}
		if took > 0 {
			cr.Annotations[AnnotationOutcome] = OutcomeComplete
			cr.Annotations[AnnotationCompleted] = t0.Add(took).Format(time.RFC3339)
		}
		crs = append(crs, *cr)
	}
	got := Durations(crs, 2)
	if len(got) != 2 || got[0] != 30*time.Minute || got[1] != 20*time.Minute {
		t.Errorf("Durations = %v, want [30m 20m] (newest first, in progress and creation left out)", got)
	}
	if all := Durations(crs, 10); len(all) != 3 {
		t.Errorf("Durations = %v, want 3 (revision 1 is the creation)", all)
	}
}
