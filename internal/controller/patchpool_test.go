package controller

import (
	"context"
	"encoding/json"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// The reconcile's metadata patch of a pool is conditional on the version
// it read when it removes or rewrites an annotation a person writes (a
// request: apply-pending, outside-windows, a halt a resume ends): a
// person's newer request written after the cache's read is never lost; the
// conflict makes the reconcile decide again on the pool as it is. A patch
// of the controller's own annotations only is not conditional.
func TestThePoolPatchNeverOverwritesAPersonsNewerRequest(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, ann map[string]string) (*Reconciler, client.Client, *nodepoolv1.NodePool) {
		t.Helper()
		pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "workers", Annotations: ann}}
		c := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(pool).WithStatusSubresource(pool).Build()
		cached := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), cached); err != nil {
			t.Fatal(err)
		}
		return &Reconciler{Client: c}, c, cached
	}
	person := func(t *testing.T, c client.Client, p *nodepoolv1.NodePool, patch string) {
		t.Helper()
		if err := c.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, c client.Client) map[string]string {
		t.Helper()
		p := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "workers"}, p); err != nil {
			t.Fatal(err)
		}
		return p.Annotations
	}

	for _, tc := range []struct {
		name, key, was, persons string
		controller              string // "" removes
	}{
		{"a newer resume request the reconcile clears", nodepoolv1.AnnotationResume, "3", "4", ""},
		{"a newer apply-pending", nodepoolv1.AnnotationApplyPending, "2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z", ""},
		{"a newer outside-windows reason", nodepoolv1.AnnotationOutsideWindowsReason, "outage", "second outage", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c, cached := setup(t, map[string]string{tc.key: tc.was})
			person(t, c, cached, `{"metadata":{"annotations":{"`+tc.key+`":"`+tc.persons+`"}}}`)
			after := cached.DeepCopy()
			if tc.controller == "" {
				delete(after.Annotations, tc.key)
			} else {
				after.Annotations[tc.key] = tc.controller
			}
			err := r.patchPool(ctx, cached, after)
			if !apierrors.IsConflict(err) {
				t.Errorf("patchPool: %v, want a conflict", err)
			}
			if got := read(t, c)[tc.key]; got != tc.persons {
				t.Errorf("%s = %q after the reconcile's patch, want the person's %q kept", tc.key, got, tc.persons)
			}
		})
	}
	t.Run("the controller's own annotations", func(t *testing.T) {
		r, c, cached := setup(t, map[string]string{nodepoolv1.AnnotationCurrentPayload: "p1"})
		person(t, c, cached, `{"metadata":{"annotations":{"example.com/note":"x"}}}`)
		after := cached.DeepCopy()
		after.Annotations[nodepoolv1.AnnotationCurrentPayload] = "p2"
		if err := r.patchPool(ctx, cached, after); err != nil {
			t.Fatalf("patchPool: %v, want no precondition on the controller's own annotations", err)
		}
		if got := read(t, c); got[nodepoolv1.AnnotationCurrentPayload] != "p2" || got["example.com/note"] != "x" {
			t.Errorf("annotations %v, want current-payload p2 and the note kept", got)
		}
	})
}

// A pool's finalizer is written as a merge patch of its metadata that
// holds the version read, never as an update: an update sends the whole
// spec as this build encodes it (a nodeDrainTimeout of "2m" comes back
// "2m0s"), which the release's nodepool-controller-writes policy refuses as
// a change of the pool's spec.
func TestThePoolsFinalizerIsAMetadataPatch(t *testing.T) {
	ctx := context.Background()
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "workers"}}
	var sent []string
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(pool).Build(), interceptor.Funcs{
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			t.Error("the pool was updated, want a patch of its metadata")
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			sent = append(sent, string(data))
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	read := &nodepoolv1.NodePool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), read); err != nil {
		t.Fatal(err)
	}
	before := read.DeepCopy()
	controllerutil.AddFinalizer(read, nodepoolv1.Finalizer)
	if err := (&Reconciler{Client: c}).writeMetadata(ctx, before, read); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 {
		t.Fatalf("%d patches, want 1", len(sent))
	}
	var patch map[string]map[string]any
	if err := json.Unmarshal([]byte(sent[0]), &patch); err != nil {
		t.Fatal(err)
	}
	if _, ok := patch["metadata"]["resourceVersion"]; len(patch) != 1 || !ok || patch["metadata"]["finalizers"] == nil {
		t.Errorf("the patch %s, want the metadata only: the finalizers, holding the resourceVersion read", sent[0])
	}
	got := &nodepoolv1.NodePool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil || !controllerutil.ContainsFinalizer(got, nodepoolv1.Finalizer) {
		t.Errorf("the pool's finalizers %v (%v), want %s", got.Finalizers, err, nodepoolv1.Finalizer)
	}
}
