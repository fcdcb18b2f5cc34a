package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

func TestAPoolKeepsItsRevisionHistoryLimitOfFinishedRollouts(t *testing.T) {
	scheme, pool := testPool()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	kept := func() []int64 {
		t.Helper()
		list := &appsv1.ControllerRevisionList{}
		if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
			t.Fatal(err)
		}
		history.Sort(list.Items)
		var out []int64
		for _, cr := range list.Items {
			out = append(out, cr.Revision)
		}
		return out
	}
	pool.Spec.Management.RevisionHistoryLimit = ptr.To[int32](2)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i, hash := range []string{"a", "b", "c", "d", "e"} {
		rec := &rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: hash, PayloadHash: "p" + hash, Started: t0.Add(time.Duration(i) * time.Minute)}
		if err := r.recordHistory(ctx, pool, nil, starts(rec)); err != nil {
			t.Fatal(err)
		}
	}
	// Two finished (superseded) and the one in progress.
	if got := kept(); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("with a limit of 2: revisions %v kept, want [3 4 5]", got)
	}
	// The limit applies when a rollout finishes...
	if err := r.recordHistory(ctx, pool, nil, rollout.Plan{Finish: rollout.OutcomeComplete, FinishedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := kept(); !slices.Equal(got, []int64{4, 5}) || len(pool.Status.Revisions) != 2 {
		t.Fatalf("with a limit of 2 once the rollout completed: revisions %v kept, status lists %v", got, pool.Status.Revisions)
	}
	// ... and a lower one on an idle pool; the current rollout's record
	// is kept whatever the limit (it keeps what the engine knows about
	// that rollout).
	pool.Spec.Management.RevisionHistoryLimit = ptr.To[int32](0)
	if err := r.recordHistory(ctx, pool, nil, rollout.Plan{}); err != nil {
		t.Fatal(err)
	}
	if got := kept(); !slices.Equal(got, []int64{5}) || len(pool.Status.Revisions) != 1 {
		t.Fatalf("with a limit of 0 on an idle pool: revisions %v kept, status lists %v; want the current record [5]", got, pool.Status.Revisions)
	}
}
