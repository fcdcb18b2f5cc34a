package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// mirrorPool is a pool of cluster in namespace ns, named and with UID name.
func mirrorPool(ns, name, cluster string, annotations map[string]string) *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), Annotations: annotations},
		Spec:       nodepoolv1.NodePoolSpec{ClusterName: cluster},
	}
}

func mirrorReconciler(objs ...client.Object) *Reconciler {
	c := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(objs...).Build()
	return &Reconciler{Client: c, APIReader: c, Settings: Settings{MirrorNamespace: "nodepool-system"}}
}

// markMirrored says the pool was mirrored since the start, as syncMirrors
// does.
func markMirrored(r *Reconciler, p *nodepoolv1.NodePool) {
	r.mirrors.done.Store(p.UID, client.ObjectKeyFromObject(p))
}

// The payload server's readiness (the marker nodepool-mirrors-ready)
// never waits on a pool whose reconcile is paused (the NodePool's or its
// Cluster's cluster.x-k8s.io/paused annotation, the Cluster's
// spec.paused, which clusterctl move sets) or that is being deleted: those
// are not reconciled, so never mirrored since the start, and their
// mirrors made before (if any) are kept. Every other pool of the shard
// still counts until it is mirrored.
func TestTheMirrorsMarkerDoesNotWaitOnPausedOrDeletingPools(t *testing.T) {
	ctx := context.Background()
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	moving := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "moving", Name: "c"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	annotated := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "held", Name: "c", Annotations: paused}}
	running := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"}}
	mirrored := mirrorPool("a", "mirrored", "c", nil)
	deleting := mirrorPool("a", "deleting", "c", nil)
	deleting.Finalizers, deleting.DeletionTimestamp = []string{nodepoolv1.Finalizer}, &metav1.Time{Time: time.Now()}
	objs := []client.Object{moving, annotated, running, mirrored, deleting,
		mirrorPool("a", "paused-pool", "c", paused),
		mirrorPool("moving", "workers", "c", nil),
		mirrorPool("held", "workers", "c", nil),
		mirrorPool("a", "no-cluster", "gone", paused),
	}
	r := mirrorReconciler(objs...)
	markMirrored(r, mirrored)
	if n, err := r.unmirrored(ctx); err != nil || n != 0 {
		t.Errorf("unmirrored: %d, %v; want 0: the marker waits on no paused or deleting pool", n, err)
	}

	// A pool that can be mirrored and was not is waited for, paused
	// Cluster or not elsewhere.
	if err := r.Client.Create(ctx, mirrorPool("a", "new", "c", nil)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.unmirrored(ctx); err != nil || n != 1 {
		t.Errorf("unmirrored with a new pool: %d, %v; want 1", n, err)
	}
	// Its Cluster resumed, a pool of a moved Cluster is waited for too.
	moving.Spec.Paused = ptr.To(false)
	if err := r.Client.Update(ctx, moving); err != nil {
		t.Fatal(err)
	}
	if n, err := r.unmirrored(ctx); err != nil || n != 2 {
		t.Errorf("unmirrored with the Cluster resumed: %d, %v; want 2", n, err)
	}
}

// The controller's memory of the pools mirrored since the start holds
// pools that exist: one whose finalizer was removed by hand (no deletion
// reconcile forgets it), or that another shard deleted, is forgotten at
// the next count; a pool made again under the same name (another UID) is
// a new pool.
func TestMirroredPoolsThatAreGoneAreForgotten(t *testing.T) {
	ctx := context.Background()
	kept := mirrorPool("a", "kept", "c", nil)
	r := mirrorReconciler(kept, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"}})
	markMirrored(r, kept)
	markMirrored(r, mirrorPool("a", "finalizer-removed", "c", nil))
	markMirrored(r, mirrorPool("b", "other-shard-deleted", "c", nil))
	remade := mirrorPool("a", "kept", "c", nil)
	remade.UID = "kept-before"
	markMirrored(r, remade)
	if _, err := r.unmirrored(ctx); err != nil {
		t.Fatal(err)
	}
	var left []types.UID
	r.mirrors.done.Range(func(k, _ any) bool { left = append(left, k.(types.UID)); return true })
	if len(left) != 1 || left[0] != kept.UID {
		t.Errorf("mirrored pools remembered: %v, want only %s", left, kept.UID)
	}
}
