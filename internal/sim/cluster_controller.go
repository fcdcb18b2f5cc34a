package sim

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simclusters;simclusters/status,verbs=get;list;watch;update;patch

// clusterReconciler reports every SimCluster provisioned and Ready: the
// simulated infrastructure has nothing to create.
type clusterReconciler struct {
	client client.Client
}

func (r *clusterReconciler) setupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simcluster").
		For(&simv1.SimCluster{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

func (r *clusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &simv1.SimCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, c); err != nil || !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ptr.Deref(c.Status.Initialization.Provisioned, false) && conditions.IsTrue(c, clusterv1.ReadyCondition) {
		return ctrl.Result{}, nil
	}
	before := c.DeepCopy()
	c.Status.Initialization.Provisioned = ptr.To(true)
	conditions.Set(c, metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Provisioned",
		Message: "the simulated infrastructure has nothing to provision", ObservedGeneration: c.Generation})
	if err := r.client.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching SimCluster %s: %w", req, err)
	}
	return ctrl.Result{}, nil
}
