package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Cluster API's pause, and clusterctl move. A move pauses the Cluster
// (spec.paused) on the source, copies every object of its hierarchy to the
// target (where the Cluster arrives paused), deletes the source's, and
// resumes the Cluster on the target. While a pool's Cluster is paused, or
// the pool carries Cluster API's paused annotation, the controller writes
// nothing to the pool's objects: no Secret is rebuilt on a source whose
// objects the move is deleting, nothing is created on a target whose
// objects have not all arrived. It says so once, on ReconciliationActive.

// deleteForMoveAnnotation is the annotation clusterctl move puts on each
// source object just before it deletes it.
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// pausedBy says why nothing is written for pool now, or "" when the pool
// is not paused. cluster is nil when it does not exist.
func pausedBy(cluster *clusterv1.Cluster, pool *nodepoolv1.NodePool) string {
	if _, ok := pool.Annotations[clusterv1.PausedAnnotation]; ok {
		return fmt.Sprintf("the NodePool carries the annotation %s: nodepool writes nothing to this pool's objects until it is removed", clusterv1.PausedAnnotation)
	}
	if cluster == nil {
		return ""
	}
	if ptr.Deref(cluster.Spec.Paused, false) {
		return fmt.Sprintf("Cluster %s is paused (spec.paused; clusterctl move sets it while it moves the cluster): nodepool writes nothing to this pool's objects until the Cluster is resumed", cluster.Name)
	}
	if _, ok := cluster.Annotations[clusterv1.PausedAnnotation]; ok {
		return fmt.Sprintf("Cluster %s carries the annotation %s: nodepool writes nothing to this pool's objects until it is removed", cluster.Name, clusterv1.PausedAnnotation)
	}
	return ""
}

// reconcilePaused only says that the pool is paused, and why: one status
// patch when ReconciliationActive does not say so yet, nothing otherwise.
// Its other conditions and status stay as they were. The Cluster's and the
// pool's watches bring the pool back when the pause ends.
func (r *Reconciler) reconcilePaused(ctx context.Context, pool *nodepoolv1.NodePool, why string) (ctrl.Result, error) {
	defer observeReconciled(pool, r.now()) // reconcile_metrics.go: looked at, on purpose doing nothing
	before := pool.DeepCopy()
	meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{
		Type: nodepoolv1.ConditionReconciliationActive, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonClusterPaused, Message: why, ObservedGeneration: pool.Status.ObservedGeneration,
	})
	if equality.Semantic.DeepEqual(before.Status, pool.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, pool, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// clusterOf reads the pool's Cluster from the cache; nil when it does not
// exist (gather reports that on the pool's conditions).
func (r *Reconciler) clusterOf(ctx context.Context, pool *nodepoolv1.NodePool) (*clusterv1.Cluster, error) {
	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}, cluster)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return cluster, nil
}

// ownByCluster makes the pool's Cluster one of its (non-controller)
// owners, as Cluster API does for a MachineDeployment: the pool is then in
// the Cluster's hierarchy, which clusterctl move carries (the pool after
// its Cluster, then everything the pool controls), and it goes when the
// Cluster is deleted. The reconcile's one metadata patch writes it.
func ownByCluster(pool *nodepoolv1.NodePool, cluster *clusterv1.Cluster) {
	if cluster == nil {
		return
	}
	pool.OwnerReferences = util.EnsureOwnerRef(pool.OwnerReferences, metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	})
}

// clusterOwned gives obj, made for the pool, the Cluster owner reference
// the pool carries (ownByCluster). Cluster API puts that reference on every
// MachineDeployment, stand-alone MachineSet and infrastructure template of
// a Cluster; made with it, they cost no patch of Cluster API's each.
func clusterOwned(pool *nodepoolv1.NodePool, obj metav1.Object) {
	for _, ref := range pool.OwnerReferences {
		if ref.Kind == "Cluster" && ref.APIVersion == clusterv1.GroupVersion.String() {
			obj.SetOwnerReferences(util.EnsureOwnerRef(obj.GetOwnerReferences(), ref))
		}
	}
}

// deletedForMove reports whether a pool being deleted is deleted by
// clusterctl move: its copy lives on in the target management cluster, so
// its MachineDeployment, machines and Secrets (moved too) must not be
// deleted. Only the finalizer goes.
func (r *Reconciler) deletedForMove(ctx context.Context, pool *nodepoolv1.NodePool) (bool, error) {
	if _, ok := pool.Annotations[deleteForMoveAnnotation]; !ok {
		return false, nil
	}
	if before := pool.DeepCopy(); controllerutil.RemoveFinalizer(pool, nodepoolv1.Finalizer) {
		forgetPool(pool)
		r.archived.Delete(pool.UID)
		r.ownForced.Delete(pool.UID)
		return true, client.IgnoreNotFound(r.writeMetadata(ctx, before, pool))
	}
	return true, nil
}
