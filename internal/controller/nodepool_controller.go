package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
)

// Reconciler reconciles NodePools.
type Reconciler struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// APIReader reads uncached: the pool's referenced ConfigMaps and
	// Secrets, whose content the cache strips.
	APIReader client.Reader
	// ClusterCache reaches each workload cluster's Nodes.
	ClusterCache clustercache.ClusterCache
	// Recorder emits events on pools.
	Recorder events.EventRecorder
	Settings Settings
	// Clock returns now; nil means time.Now. Tests move time with it.
	Clock func() time.Time

	// Cache is the manager's cache, for the watches of referenced
	// infrastructure template kinds (started as pools reference them).
	Cache cache.Cache

	// controller watches the Nodes of InPlace pools' workload clusters.
	controller controller.Controller
	// watchedTemplates holds the template kinds watched already.
	watchedTemplates sync.Map
	// renders is the render cache (rendercache.go); nil renders every time.
	renders *renderCache
}

// +kubebuilder:rbac:groups=nodepool.dev,resources=nodepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nodepool.dev,resources=nodepools/status;nodepools/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinesets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simmachinetemplates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// Reconcile gathers a pool's inputs once, asks the engine for a plan,
// applies it and patches the pool once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	if !r.Settings.Shard.Owns(req.Namespace) {
		return ctrl.Result{}, nil // another shard's pool (shard.go)
	}
	pool := &nodepoolv1.NodePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := r.log(pool)
	ctx = logr.NewContext(ctx, log)
	if !pool.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, pool)
	}
	if controllerutil.AddFinalizer(pool, nodepoolv1.Finalizer) {
		if err := r.Client.Update(ctx, pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := pool.DeepCopy()

	in := rollout.Input{Pool: pool, Now: r.now(), Settings: rollout.Settings{TokenTTL: r.Settings.TokenTTL,
		CleanupGracePeriod: r.Settings.CleanupGracePeriod, NodeAgentTimeout: r.Settings.NodeAgentTimeout}}
	// Through the render cache (rendercache.go): no render for unchanged inputs.
	gathered, err := r.latest(ctx, pool, &in)
	if err != nil {
		return ctrl.Result{}, err
	}

	if gathered != nil {
		if err := r.watchTemplates(gathered.InfrastructureTemplate); err != nil {
			log.V(1).Info("template edits are seen at the next resync", "reason", err.Error())
		}
	}
	w, err := r.observe(ctx, pool, &in)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.fitsInASecret(pool, &in); err != nil { // rendercache.go
		in.Latest, in.Hashes, in.RenderErr, gathered = nil, payload.Hashes{}, err, nil
	}
	plan := rollout.Decide(in)
	// The record of a rollout is written before the write that starts it:
	// a crash in between leaves a record the next reconcile recognises
	// (recordHistory writes one record per rollout), never a rollout
	// without one.
	var applyErr error
	if len(w.conflicts) > 0 {
		applyErr = &conflictError{objects: w.conflicts}
	} else if applyErr = r.recordHistory(ctx, pool, gathered, plan); applyErr == nil {
		applyErr = r.apply(ctx, pool, gathered, in.TemplateName, w, plan)
	}
	if applyErr != nil {
		stage := "apply"
		if isConflict(applyErr) {
			stage = "conflict"
		}
		observeReconcileError(pool, stage)
	}

	for k, v := range plan.Annotations {
		if pool.Annotations == nil {
			pool.Annotations = map[string]string{}
		}
		pool.Annotations[k] = v
	}
	var was metav1.Condition
	if c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionReconciliationActive); c != nil {
		was = *c
	}
	r.writeStatus(pool, in, plan, applyErr)
	if isConflict(applyErr) {
		if was.Reason != nodepoolv1.ReasonNameConflict || was.Message != applyErr.Error() {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, nodepoolv1.ReasonNameConflict, "Reconcile", "%s", applyErr.Error())
		}
		// Nothing of the plan was applied: its events did not happen.
		plan.Events = nil
	}
	for _, e := range plan.Events {
		r.Recorder.Eventf(pool, nil, e.Type, e.Reason, "Reconcile", "%s", e.Message)
	}
	if err := r.patchPool(ctx, before, pool); err != nil {
		observeReconcileError(pool, "status")
		return ctrl.Result{}, err
	}
	observeDrift(pool, in.Now)
	if applyErr == nil {
		observeInPlace(pool, in.InPlace, plan)
	}
	if applyErr != nil {
		return ctrl.Result{}, applyErr
	}
	requeue := r.Settings.ResyncPeriod
	if plan.RequeueAfter > 0 && plan.RequeueAfter < requeue {
		requeue = plan.RequeueAfter
	}
	if pool.Status.Updating != "" && requeue > 5*time.Second {
		requeue = 5 * time.Second
	}
	if plan.UpdateInProgress && requeue > 2*time.Second {
		requeue = 2 * time.Second // drains progress without events
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// writeStatus copies the plan's status and conditions onto the pool.
func (r *Reconciler) writeStatus(pool *nodepoolv1.NodePool, in rollout.Input, plan rollout.Plan, applyErr error) {
	st := &pool.Status
	st.ObservedGeneration = pool.Generation
	st.Version, st.Updating, st.PendingManagementChanges, st.Nodes = plan.Version, plan.Updating, plan.Pending, plan.Nodes
	if md := in.MachineDeployment; md != nil {
		st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = md.Replicas, md.ReadyReplicas, md.UpToDateReplicas
	}
	active := metav1.Condition{Type: nodepoolv1.ConditionReconciliationActive, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected, Message: "the controller acts on this pool"}
	if applyErr != nil {
		active.Status, active.Reason, active.Message = metav1.ConditionFalse, "ApplyFailed", applyErr.Error()
		if isConflict(applyErr) {
			active.Reason = nodepoolv1.ReasonNameConflict
		}
	}
	for _, c := range append(plan.Conditions, active) {
		c.ObservedGeneration = pool.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// patchPool writes the pool's metadata and status changes, once.
// A reconcile that changes nothing writes nothing.
func (r *Reconciler) patchPool(ctx context.Context, before, after *nodepoolv1.NodePool) error {
	status := after.Status.DeepCopy()
	if !equality.Semantic.DeepEqual(before.ObjectMeta, after.ObjectMeta) {
		if err := r.Client.Patch(ctx, after, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("patching NodePool: %w", err)
		}
	}
	after.Status = *status
	if !equality.Semantic.DeepEqual(before.Status, after.Status) {
		if err := r.Client.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("patching NodePool status: %w", err)
		}
	}
	return nil
}

// reconcileDelete deletes the MachineDeployment, waits for the machines to
// go, then lets garbage collection take the owned Secrets and templates.
func (r *Reconciler) reconcileDelete(ctx context.Context, pool *nodepoolv1.NodePool) (ctrl.Result, error) {
	// Both kinds are looked for: a pool's upgradeType is immutable, but a
	// MachineSet or MachineDeployment left by an earlier version is not.
	for _, owned := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.MachineSet{}} {
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Name}, owned)
		if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(owned, pool)) {
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if owned.GetDeletionTimestamp().IsZero() {
			if err := r.Client.Delete(ctx, owned); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(pool.Namespace),
		client.MatchingLabels{nodepoolv1.LabelPool: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName}); err != nil {
		return ctrl.Result{}, err
	}
	if len(machines.Items) > 0 {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	// The machines are gone: delete what the pool owns rather than wait
	// for garbage collection, so nothing is left behind if it is slow or off.
	if err := r.deleteOwned(ctx, pool); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cleanupTemplateClones(ctx, pool, nil, true); err != nil {
		r.log(pool).Info("infrastructure template clones not deleted", "reason", err.Error())
	}
	if pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		r.deleteUpdateSecret(ctx, pool)
	}
	if controllerutil.RemoveFinalizer(pool, nodepoolv1.Finalizer) {
		forgetPool(pool)
		return ctrl.Result{}, r.Client.Update(ctx, pool)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) log(pool *nodepoolv1.NodePool) logr.Logger {
	return ctrl.Log.WithName("nodepool").WithValues("pool", pool.Namespace+"/"+pool.Name)
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.Settings.Default()
	if err := r.Settings.Validate(); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("nodepool").
		WithOptions(opts).
		For(&nodepoolv1.NodePool{}).
		Owns(&clusterv1.MachineDeployment{}).
		Owns(&corev1.Secret{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(byPoolLabel)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(byPoolLabel)).
		WatchesMetadata(configMapMetadata(), handler.EnqueueRequestsFromMapFunc(r.poolsReferencing)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.poolsReferencing)).
		// Only spec changes: a Cluster's status changes with every machine of it.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfCluster), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

func (r *Reconciler) deleteOwned(ctx context.Context, pool *nodepoolv1.NodePool) error {
	secretList := &corev1.SecretList{}
	if err := r.Client.List(ctx, secretList, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return err
	}
	for i := range secretList.Items {
		if s := &secretList.Items[i]; metav1.IsControlledBy(s, pool) {
			if err := r.deleteSecret(ctx, s); err != nil {
				return err
			}
		}
	}
	revs := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, revs, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return err
	}
	for i := range revs.Items {
		if cr := &revs.Items[i]; metav1.IsControlledBy(cr, pool) {
			if err := r.Client.Delete(ctx, cr); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting revision %s: %w", cr.Name, err)
			}
		}
	}
	return nil
}
