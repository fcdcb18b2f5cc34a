package sim

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"
	"sigs.k8s.io/cluster-api/util/secret"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simcontrolplanes;simcontrolplanes/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch

// controlPlaneReconciler reports a SimControlPlane initialised and keeps
// its Cluster's <cluster>-kubeconfig Secret pointing at the workload API
// server (its view of it, when the sim serves views: cluster_view.go).
type controlPlaneReconciler struct {
	client client.Client
	// config is the workload API server a Cluster's kubeconfig names.
	config   func(cluster client.ObjectKey) *rest.Config
	recorder events.EventRecorder
}

func (r *controlPlaneReconciler) setupWithManager(mgr ctrl.Manager, concurrency int) error {
	log := mgr.GetLogger().WithName("simcontrolplane")
	return ctrl.NewControllerManagedBy(mgr).
		Named("simcontrolplane").
		For(&simv1.SimControlPlane{}).
		Owns(&corev1.Secret{}).
		// A Cluster resumed (after clusterctl move, its control plane
		// arrives while it is paused) brings its control plane back.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToControlPlane),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

// Reconcile writes the kubeconfig Secret of the owning Cluster, then
// reports the control plane initialised and externally managed.
func (r *controlPlaneReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	cp := &simv1.SimControlPlane{}
	if err := r.client.Get(ctx, req.NamespacedName, cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cp.DeletionTimestamp.IsZero() {
		// The kubeconfig Secret is owned by the control plane: the garbage
		// collector deletes it.
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.client, cp.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the Cluster that owns SimControlPlane %s: %w", req, err)
	}
	// A Paused condition just written needs no new reconcile: go on.
	if isPaused, _, err := paused.EnsurePausedCondition(ctx, r.client, cluster, cp); err != nil || isPaused {
		return ctrl.Result{}, err
	}
	helper, err := patch.NewHelper(cp, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, cp, patch.WithOwnedConditions{Conditions: []string{simv1.ConditionAvailable, clusterv1.PausedCondition}})
		if err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, fmt.Errorf("patching SimControlPlane %s: %w", req, err)})
		}
	}()
	cp.Status.ExternalManagedControlPlane = ptr.To(true)
	if cluster == nil {
		// Cluster API sets the owner reference once a Cluster's
		// spec.controlPlaneRef names this control plane; that update
		// brings us back.
		r.setAvailable(cp, metav1.ConditionFalse, simv1.ReasonWaitingForCluster, "no Cluster references this control plane in spec.controlPlaneRef yet")
		return ctrl.Result{}, nil
	}
	reason, err := r.reconcileKubeconfig(ctx, cp, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	cp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	r.setAvailable(cp, metav1.ConditionTrue, reason,
		fmt.Sprintf("Secret %s points at the workload API server %s", secret.Name(cluster.Name, secret.Kubeconfig), r.config(util.ObjectKey(cluster)).Host))
	return ctrl.Result{}, nil
}

// reconcileKubeconfig creates the Cluster's kubeconfig Secret, owned by the
// control plane, or brings one it owns up to date. A Secret someone else
// made is left alone.
func (r *controlPlaneReconciler) reconcileKubeconfig(ctx context.Context, cp *simv1.SimControlPlane, cluster *clusterv1.Cluster) (string, error) {
	server := r.config(util.ObjectKey(cluster))
	data, err := kubeconfigFor(server, cluster.Name)
	if err != nil {
		return "", err
	}
	owner := metav1.OwnerReference{
		APIVersion: simv1.GroupVersion.String(), Kind: simv1.KindSimControlPlane,
		Name: cp.Name, UID: cp.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	want := kubeconfig.GenerateSecretWithOwner(util.ObjectKey(cluster), data, owner)
	have := &corev1.Secret{}
	err = r.client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			// One the cache does not show (not of type cluster.x-k8s.io/secret).
			return simv1.ReasonKubeconfigNotOwned, nil
		} else if err != nil {
			return "", fmt.Errorf("creating Secret %s/%s: %w", want.Namespace, want.Name, err)
		}
		r.recorder.Eventf(cp, nil, corev1.EventTypeNormal, "KubeconfigCreated", "Initialize", "Created Secret %s pointing at %s", want.Name, server.Host)
		return simv1.ReasonKubeconfigReady, nil
	case err != nil:
		return "", fmt.Errorf("reading Secret %s/%s: %w", want.Namespace, want.Name, err)
	case !util.IsControlledBy(have, cp, simv1.GroupVersion.WithKind(simv1.KindSimControlPlane).GroupKind()):
		return simv1.ReasonKubeconfigNotOwned, nil
	case bytes.Equal(have.Data[secret.KubeconfigDataName], data) && have.Labels[clusterv1.ClusterNameLabel] == cluster.Name:
		return simv1.ReasonKubeconfigReady, nil
	}
	before := have.DeepCopy()
	have.Data = want.Data
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	have.Labels[clusterv1.ClusterNameLabel] = cluster.Name
	if err := r.client.Patch(ctx, have, client.MergeFrom(before)); err != nil {
		return "", fmt.Errorf("updating Secret %s/%s: %w", have.Namespace, have.Name, err)
	}
	return simv1.ReasonKubeconfigReady, nil
}

func (r *controlPlaneReconciler) setAvailable(cp *simv1.SimControlPlane, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(cp, metav1.Condition{Type: simv1.ConditionAvailable, Status: status, Reason: reason, Message: message, ObservedGeneration: cp.Generation})
}

// clusterToControlPlane maps a Cluster to the SimControlPlane its
// spec.controlPlaneRef names.
func clusterToControlPlane(_ context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*clusterv1.Cluster)
	if !ok || c.Spec.ControlPlaneRef.Kind != simv1.KindSimControlPlane || c.Spec.ControlPlaneRef.APIGroup != simv1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}}
}
