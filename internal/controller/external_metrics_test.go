package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A change from outside is counted once, when it is recorded: a reconcile
// that finds the same change again (its apply failed) adds nothing. A
// reconciled pool's series is there at 0 before its first change, so that
// an alert on its increase sees the first one.
func TestEachRecordedExternalChangeCountsOnceInTheExternalChangesMetric(t *testing.T) {
	ctx := context.Background()
	scheme, pool := testPool()
	defer forgetPool(pool)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool.DeepCopy()).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Settings: Settings{HistoryLimit: 10}}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	found := func() *poolReconcile {
		return &poolReconcile{pool: pool, before: pool.DeepCopy(), w: &world{external: externalChanges{
			{kind: "MachineDeployment", name: "workers", manager: "kubectl-patch", at: at, fields: []string{"spec.rollout.after"}},
		}}}
	}
	observeReconciled(pool, at)
	if n, got := testutil.CollectAndCount(externalChangesRecorded), testutil.ToFloat64(externalChangesRecorded.WithLabelValues(pool.Namespace, pool.Name)); n != 1 || got != 0 {
		t.Errorf("a reconciled pool without external changes: %d series at %v, want one at 0", n, got)
	}
	for range 2 {
		if err := r.recordExternal(ctx, found()); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(externalChangesRecorded.WithLabelValues(pool.Namespace, pool.Name)); got != 1 {
		t.Errorf("nodepool_external_changes_total{namespace=%q,pool=%q} = %v after one change found twice, want 1", pool.Namespace, pool.Name, got)
	}
	forgetPool(pool)
	if n := testutil.CollectAndCount(externalChangesRecorded); n != 0 {
		t.Errorf("%d series after the pool was deleted, want none", n)
	}
}
