package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// Releasing a pool removes the fleet's apply-pending only while the pool
// still holds it: an apply-pending a person wrote after the fleet
// controller's cache read the pool is a newer request and stays (the
// release patch is conditional on the version read; a conflict re-reads).
// The fleet's own request, still on the pool, is removed as before.
func TestAFleetReleaseKeepsAnApplyPendingWrittenSinceItsRead(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := now.Add(-time.Hour)
	fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: "proxy-fix"}}
	setup := func(t *testing.T) (*FleetRolloutReconciler, client.Client, *nodepoolv1.NodePool) {
		t.Helper()
		pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "workers", Annotations: map[string]string{
			nodepoolv1.AnnotationApplyPending: at.Format(time.RFC3339),
			nodepoolv1.AnnotationFleetRollout: fr.Name,
		}}}
		c := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(pool).Build()
		cached := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), cached); err != nil {
			t.Fatal(err)
		}
		return &FleetRolloutReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Clock: func() time.Time { return now }}, c, cached
	}
	release := &poolWrite{release: &fleet.Release{Ref: fleet.Ref{Namespace: "a", Name: "workers"}, At: &at}}
	read := func(t *testing.T, c client.Client) map[string]string {
		t.Helper()
		p := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "workers"}, p); err != nil {
			t.Fatal(err)
		}
		return p.Annotations
	}

	t.Run("a person's newer apply-pending", func(t *testing.T) {
		r, c, cached := setup(t)
		// A person asks again after the cache's read.
		newer := now.Format(time.RFC3339)
		person := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+nodepoolv1.AnnotationApplyPending+`":"`+newer+`","`+nodepoolv1.AnnotationFleetRollout+`":null}}}`))
		if err := c.Patch(ctx, cached.DeepCopy(), person); err != nil {
			t.Fatal(err)
		}
		if err := r.writePool(ctx, fr, release.release.Ref, cached, release, now); err != nil {
			t.Fatal(err)
		}
		if got := read(t, c)[nodepoolv1.AnnotationApplyPending]; got != newer {
			t.Errorf("apply-pending %q after the release, want the person's %q kept", got, newer)
		}
	})
	t.Run("the fleet's own apply-pending", func(t *testing.T) {
		r, c, cached := setup(t)
		// Another write in between (not of the request): the release
		// re-reads and still removes the fleet's.
		note := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`))
		if err := c.Patch(ctx, cached.DeepCopy(), note); err != nil {
			t.Fatal(err)
		}
		if err := r.writePool(ctx, fr, release.release.Ref, cached, release, now); err != nil {
			t.Fatal(err)
		}
		got := read(t, c)
		if _, ok := got[nodepoolv1.AnnotationApplyPending]; ok {
			t.Errorf("apply-pending %q after the release, want removed", got[nodepoolv1.AnnotationApplyPending])
		}
		if _, ok := got[nodepoolv1.AnnotationFleetRollout]; ok {
			t.Errorf("fleet-rollout %q after the release, want removed", got[nodepoolv1.AnnotationFleetRollout])
		}
		if got["example.com/note"] != "x" {
			t.Errorf("annotations %v, want the note kept", got)
		}
	})
}
