package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

// The archive read from a cache that has not yet seen the controller's
// own last write of it conflicts when patched. That is no failure of the
// reconcile (no error, no ReconciliationActive=False, no retry with
// backoff): the cache's newer archive is the pool's own Secret, whose
// event reconciles the pool again, and that reconcile archives.
func TestAnArchiveReadFromAStaleCacheIsArchivedByTheNextReconcile(t *testing.T) {
	scheme, pool := testPool()
	stale := true
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.Secret); ok && stale {
				return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	archive := func() []byte {
		t.Helper()
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: history.ArchiveName(pool.Name)}, s); err != nil {
			t.Fatal(err)
		}
		return s.Data[history.KeyArchive]
	}

	if err := r.recordHistory(ctx, pool, nil, starts(&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: t0})); err != nil {
		t.Fatal(err)
	}
	if err := r.archiveHistory(ctx, &poolReconcile{pool: pool}); err != nil {
		t.Fatal(err)
	}
	first := archive()
	if len(first) == 0 {
		t.Fatal("no archive of the first record")
	}

	if err := r.recordHistory(ctx, pool, nil, starts(&rollout.Record{Initiator: rollout.InitiatorVersion, RolloutHash: "b", PayloadHash: "q", Started: t0.Add(time.Minute)})); err != nil {
		t.Fatal(err)
	}
	if err := r.archiveHistory(ctx, &poolReconcile{pool: pool}); err != nil {
		t.Fatalf("a conflict on the pool's own archive failed the reconcile: %v", err)
	}
	if string(archive()) != string(first) {
		t.Fatal("the archive changed although its patch conflicted")
	}

	stale = false // the cache caught up: the Secret's event reconciles the pool
	if err := r.archiveHistory(ctx, &poolReconcile{pool: pool}); err != nil {
		t.Fatal(err)
	}
	if string(archive()) == string(first) {
		t.Error("the next reconcile did not archive the second record")
	}
}
