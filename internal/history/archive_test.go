package history

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestTheArchiveGivesBackEveryRecordUnderItsNameNumberAndOutcome(t *testing.T) {
	started := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r2, err := New("ns", "workers", Entry{Revision: 2, Initiator: "spec", RolloutHash: "b", PayloadHash: "pb", Started: started.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := New("ns", "workers", Entry{Revision: 1, Initiator: "create", RolloutHash: "a", PayloadHash: "pa", Started: started})
	if err != nil {
		t.Fatal(err)
	}
	r1.Annotations[AnnotationOutcome] = OutcomeComplete
	r1.Annotations[AnnotationCompleted] = started.Add(time.Minute).Format(time.RFC3339)
	s, err := Archive("ns", "workers", []appsv1.ControllerRevision{*r2, *r1})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "workers-history" || s.Labels[nodepoolv1.LabelPool] != "workers" || s.Type != TypeArchive {
		t.Fatalf("archive Secret %s labels %v type %s", s.Name, s.Labels, s.Type)
	}
	again, _ := Archive("ns", "workers", []appsv1.ControllerRevision{*r1, *r2})
	if !SameArchive(s, again) {
		t.Error("the archive depends on the order the records are listed in")
	}
	got, err := Unarchive(s, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "workers-r1" || got[1].Name != "workers-r2" || got[0].Revision != 1 {
		t.Fatalf("unarchived %+v", got)
	}
	e, err := Decode(&got[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Initiator != "create" || e.Outcome != OutcomeComplete || e.Completed == nil || !e.Started.Equal(started) || got[0].Labels[nodepoolv1.LabelPool] != "workers" {
		t.Errorf("record 1 came back as %+v, labels %v", e, got[0].Labels)
	}
}

func TestAnArchiveOfAnotherPoolsNamesRestoresNothing(t *testing.T) {
	r1, _ := New("ns", "other", Entry{Revision: 1, Initiator: "create"})
	s, err := Archive("ns", "workers", []appsv1.ControllerRevision{*r1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Unarchive(s, "workers"); err == nil {
		t.Fatalf("an archive holding other-r1 restored %d records into workers", len(got))
	}
	s.Type = "Opaque"
	if _, err := Unarchive(s, "workers"); err == nil {
		t.Fatal("an Opaque Secret was read as an archive")
	}
}
