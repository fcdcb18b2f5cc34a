package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// A reconcile that wrote a rollout's record and then crashed (or ran on a
// MachineDeployment read from a stale cache) decides the same rollout
// again: the record is recognised, not written twice, and not superseded.
func TestARolloutDecidedTwiceIsRecordedOnce(t *testing.T) {
	scheme, pool := testPool()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	first := starts(&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0})
	second := starts(&rollout.Record{Initiator: rollout.InitiatorVersion, RolloutHash: "b", PayloadHash: "q", Started: t0.Add(time.Minute)})
	for _, plan := range []rollout.Plan{first, second, second, second} {
		if err := r.recordHistory(ctx, pool, nil, plan); err != nil {
			t.Fatal(err)
		}
	}
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	history.Sort(list.Items)
	if len(list.Items) != 2 {
		t.Fatalf("%d revisions, want 2 (one per rollout)", len(list.Items))
	}
	if got := list.Items[0].Annotations[history.AnnotationOutcome]; got != history.OutcomeSuperseded {
		t.Errorf("first rollout outcome %q, want Superseded", got)
	}
	if got := list.Items[1].Annotations[history.AnnotationOutcome]; got != history.OutcomeInProgress {
		t.Errorf("second rollout outcome %q, want InProgress (recognised, not superseded by itself)", got)
	}
	// The same rollout hash forced again later is a new rollout.
	at := t0.Add(time.Hour)
	forced := starts(&rollout.Record{Initiator: rollout.InitiatorRestart, RolloutHash: "b", PayloadHash: "q", Started: at, ForcedAt: &at})
	if err := r.recordHistory(ctx, pool, nil, forced); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d revisions, want 3 after a forced rollout", len(list.Items))
	}
}

// starts is the plan the engine makes when a rollout starts: its record,
// and the rollout in progress superseded then.
func starts(rec *rollout.Record) rollout.Plan {
	return rollout.Plan{Record: rec, Finish: rollout.OutcomeSuperseded, FinishedAt: rec.Started}
}

// A revision someone made with the pool's label and a copy of its owner
// reference is not the pool's record: the controller neither marks nor
// prunes it, numbers past it, and lists only its own in status.revisions.
func TestARevisionWithACopiedOwnerReferenceIsNotARecord(t *testing.T) {
	scheme, pool := testPool()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if err := r.recordHistory(ctx, pool, nil, starts(&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0})); err != nil {
		t.Fatal(err)
	}
	forged, err := history.New("ns", "workers", history.Entry{Revision: 2, Initiator: "spec", RolloutHash: "evil", Started: t0})
	if err != nil {
		t.Fatal(err)
	}
	forged.UID = "forged-uid"
	if err := controllerutil.SetControllerReference(pool, forged, scheme); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if err := r.recordHistory(ctx, pool, nil, starts(&rollout.Record{Initiator: rollout.InitiatorVersion, RolloutHash: "b", PayloadHash: "q", Started: t0.Add(time.Minute)})); err != nil {
		t.Fatal(err)
	}
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	records := history.Records(pool, list.Items)
	if len(records) != 2 || records[0].Revision != 1 || records[1].Revision != 3 {
		t.Fatalf("records %v, want revisions 1 and 3", history.References(records))
	}
	for _, cr := range list.Items {
		if cr.Name == forged.Name && cr.Annotations[history.AnnotationOutcome] != history.OutcomeInProgress {
			t.Errorf("the forged revision was marked %s", cr.Annotations[history.AnnotationOutcome])
		}
	}
}

// A reconcile that wrote a record and crashed before its status listed
// it: the next one adopts the record rather than writing a second.
func TestARecordACrashKeptOffTheStatusIsAdopted(t *testing.T) {
	scheme, pool := testPool()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	first := starts(&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0})
	second := starts(&rollout.Record{Initiator: rollout.InitiatorVersion, RolloutHash: "b", PayloadHash: "q", Started: t0.Add(time.Minute)})
	if err := r.recordHistory(ctx, pool, nil, first); err != nil {
		t.Fatal(err)
	}
	listed := pool.Status.Revisions
	if err := r.recordHistory(ctx, pool, nil, second); err != nil {
		t.Fatal(err)
	}
	pool.Status.Revisions = listed // the status patch never happened
	if err := r.recordHistory(ctx, pool, nil, second); err != nil {
		t.Fatal(err)
	}
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || len(pool.Status.Revisions) != 2 || pool.Status.Revisions[1].Revision != 2 {
		t.Errorf("%d revisions, status lists %v; want 2, both listed", len(list.Items), pool.Status.Revisions)
	}
}

// The record of a rollout keeps what it set out to do (machines, rounds,
// soaks), and the history reads it back for the duration prediction with
// its duration once it completes.
func TestARecordKeepsItsMachinesRoundsAndSoaks(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	got := recordedRollouts(t, t0.Add(2*time.Hour),
		&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0, Machines: 3, Rounds: 3},
		&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "b", PayloadHash: "q", Started: t0.Add(time.Hour), Machines: 30, Rounds: 11, Soak: 30 * time.Minute})
	want := poolmath.PastRollout{Shape: poolmath.Shape{Machines: 30, Rounds: 11, Soak: 30 * time.Minute}, Took: time.Hour, Complete: true}
	if len(got) != 1 || got[0] != want {
		t.Errorf("history reads %+v, want [%+v] (revision 1, the creation, left out)", got, want)
	}
}

// recordedRollouts records each rollout as it starts (superseding the one
// before), completes the last at finished, and returns what the duration
// prediction reads of the records (history.Rollouts).
func recordedRollouts(t *testing.T, finished time.Time, recs ...*rollout.Record) []poolmath.PastRollout {
	t.Helper()
	scheme, pool := testPool()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	for i, rec := range recs {
		if err := r.recordHistory(ctx, pool, nil, starts(rec)); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := r.recordHistory(ctx, pool, nil, rollout.Plan{Finish: rollout.OutcomeComplete, FinishedAt: finished}); err != nil {
		t.Fatal(err)
	}
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	return history.Rollouts(list.Items, history.RecentLimit)
}

// A rollout that completes within the second it started (a pool of one
// small machine, a fast provider) keeps its duration: its completion is
// recorded as precisely as its start, so the duration prediction reads a
// positive time and counts it (a completion rounded down to the second
// read as a negative duration, and the rollout was left out).
func TestARolloutDoneWithinASecondOfItsStartKeepsItsDuration(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	got := recordedRollouts(t, t0.Add(time.Minute+870*time.Millisecond),
		&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0, Machines: 1, Rounds: 1},
		&rollout.Record{Initiator: rollout.InitiatorRestart, RolloutHash: "a", PayloadHash: "p", Started: t0.Add(time.Minute + 3*time.Millisecond), ForcedAt: ptr.To(t0.Add(time.Minute)), Machines: 1, Rounds: 1})
	want := poolmath.PastRollout{Shape: poolmath.Shape{Machines: 1, Rounds: 1}, Took: 867 * time.Millisecond, Complete: true}
	if len(got) != 1 || got[0] != want {
		t.Errorf("history reads %+v, want [%+v]", got, want)
	}
}
