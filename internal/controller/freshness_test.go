package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"nodepool.dev/nodepool/internal/rollout"
)

// A pause patched a moment before a ConfigMap edit can reach the
// controller after the edit: the reconcile the edit wakes decides on the
// unpaused pool of the cache. The rollout it would start is not recorded
// (nor started); once the cache has the pool as the API server does, it is.
func TestARolloutDecidedOnAStaleCachedPoolIsNotStarted(t *testing.T) {
	scheme, pool := testPool()
	pool.Generation = 2
	pool.Spec.Management.PausedUntil = "true"
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool.DeepCopy()).Build()
	r := &Reconciler{Client: api, APIReader: api, Settings: Settings{HistoryLimit: 10}}
	ctx := context.Background()

	cached := pool.DeepCopy() // before the pause
	cached.Generation, cached.Spec.Management.PausedUntil = 1, ""
	plan := starts(&rollout.Record{Initiator: rollout.InitiatorSpec, RolloutHash: "a", PayloadHash: "p", Started: time.Now()})
	err := r.record(ctx, &poolReconcile{pool: cached, plan: &plan})
	if !errors.Is(err, errStalePool) {
		t.Fatalf("a rollout decided on a stale pool: %v, want errStalePool", err)
	}
	annotated := pool.DeepCopy()
	annotated.Annotations = map[string]string{"nodepool.dev/restarted-at": "2026-12-01T00:00:00Z"}
	if err := r.record(ctx, &poolReconcile{pool: annotated, plan: &plan}); !errors.Is(err, errStalePool) {
		t.Fatalf("a rollout decided on other annotations than the API server's: %v, want errStalePool", err)
	}
	list := &appsv1.ControllerRevisionList{}
	if err := api.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d revisions written for a rollout decided on a stale pool", len(list.Items))
	}

	fresh := &poolReconcile{pool: pool.DeepCopy(), plan: &plan}
	if err := api.Get(ctx, client.ObjectKeyFromObject(pool), fresh.pool); err != nil {
		t.Fatal(err)
	}
	if err := r.record(ctx, fresh); err != nil {
		t.Fatalf("a rollout decided on the current pool: %v", err)
	}
	if err := api.List(ctx, list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d revisions, want the rollout recorded once the pool is current", len(list.Items))
	}
}
