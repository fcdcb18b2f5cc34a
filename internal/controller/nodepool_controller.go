package controller

import (
	"context"
	"errors"
	"fmt"
	"nodepool.dev/nodepool/internal/history"
	"sync"
	"sync/atomic"
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
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/userdata"
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
	// payloads decodes payload Secrets once (payloadmemo.go); nil decodes
	// at every reconcile.
	payloads *payloadMemo
	// written are the versions of the pools' current records and Secrets
	// the controller last wrote (own_writes.go).
	written ownWrites
	// refusals are the payload Secret versions ("<uid>/<resourceVersion>")
	// refused and reported already (payload_trust.go); nil reports each
	// refusal at every reconcile.
	refusals *lru[string, bool]
	// pointers renders user-data for the payload server of the settings.
	pointers atomic.Pointer[userdata.Renderer]
	// mirrors is what is known of the pools' mirrors (mirror.go).
	mirrors mirrors
	// tokenKey is the key binding token Secrets (token_trust.go).
	tokenKey tokenKey
	// archived remembers, by pool UID, the versions of the records and of
	// the history archive last found equal (history_archive.go).
	archived sync.Map
	// ownForced is, by pool UID, the forced rollout time of the pool's
	// MachineDeployment (MachineSet) last found or written as the
	// controller's (external.go).
	ownForced sync.Map
	// checkedSets is, by pool UID, the generation of each of the pool's
	// MachineSets last found with no external edit
	// (external_machinesets.go).
	checkedSets sync.Map
	// announcements are the Normal events emitted, by pool version
	// (announced); nil: none is remembered.
	announcements *lru[string, bool]
}

// announced reports whether a Normal event (a rollout started, complete,
// deferred, forced: an announcement, not a condition that holds) was
// emitted already for this version of the pool, and remembers it. A
// second reconcile of the same version (an event of the pool's
// MachineDeployment that came before the pool's own patch reached the
// cache) decides the same again: its announcement would only make the
// event recorder patch the first into a series, or race its create (a
// 404 patch, then a 409 create), two or three writes per pool that say
// nothing new. Warnings are always emitted: their series says the
// problem still holds.
func (r *Reconciler) announced(pool *nodepoolv1.NodePool, e rollout.Event) bool {
	if r.announcements == nil || e.Type != corev1.EventTypeNormal {
		return false
	}
	key := string(pool.UID) + "/" + pool.ResourceVersion + "/" + e.Reason + "/" + e.Message
	if _, seen := r.announcements.get(key); seen {
		return true
	}
	r.announcements.put(key, true)
	return false
}

// The controller's RBAC (config/rbac/role.yaml), the verbs it uses and no
// more; test/install runs the binary bound by it and checks both. Workload
// cluster Nodes and Secrets are read and written with the credentials of the
// <cluster>-kubeconfig Secret (ClusterCache), not with this role, which has
// nothing on Nodes. NodePools are updated only to add or remove the
// finalizer, and patched for their annotations and their Cluster owner
// reference (pause.go); status is patched. Secrets and ConfigMaps are read in every
// namespace: pools reference pull secrets and user configs in their own.
//
// +kubebuilder:rbac:groups=nodepool.dev,resources=nodepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nodepool.dev,resources=nodepools/status,verbs=patch
// +kubebuilder:rbac:groups=nodepool.dev,resources=nodepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments;machinesets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simmachinetemplates,verbs=get;list;watch;create;patch;delete
//
// Leader election, in the controller's namespace only (a Role): the Lease,
// and the core Events announcing a new leader.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=nodepool-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=nodepool-system

// Reconcile runs one reconcile of a pool as a short list of phases:
// gather its inputs, observe what exists, ask the engine for a plan, record
// a rollout that starts, apply. Whatever happens, the pool is patched once
// at the end (a deferred patch): a phase that fails says so on
// ReconciliationActive, with its reason and message.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	if !r.Settings.Shard.Owns(req.Namespace) {
		return ctrl.Result{}, nil // another shard's pool (shard.go)
	}
	pool := &nodepoolv1.NodePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = logr.NewContext(ctx, r.log(pool))
	cluster, err := r.clusterOf(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why := pausedBy(cluster, pool); why != "" {
		return r.reconcilePaused(ctx, pool, why) // pause.go: nothing written but the condition
	}
	if !pool.DeletionTimestamp.IsZero() {
		if moved, err := r.deletedForMove(ctx, pool); moved || err != nil {
			return ctrl.Result{}, err
		}
		return r.reconcileDelete(ctx, pool)
	}
	// A new pool's finalizer and its Cluster owner reference (pause.go:
	// in the Cluster's hierarchy, which clusterctl move carries) are one
	// write, not an update and then a patch.
	if before := pool.DeepCopy(); controllerutil.AddFinalizer(pool, nodepoolv1.Finalizer) {
		ownByCluster(pool, cluster)
		if err := r.writeMetadata(ctx, before, pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	rc := &poolReconcile{pool: pool, before: pool.DeepCopy()}
	ownByCluster(pool, cluster)
	defer func() {
		defer func() { observeReconciled(pool, r.now()) }() // reconcile_metrics.go: when it ended
		if errors.Is(retErr, errStalePool) {
			// Decided on an old pool: nothing is written; the pool's own
			// event, on its way, reconciles it again.
			retErr = nil
			return
		}
		if errors.Is(retErr, errStaleCache) {
			// Read an older record or Secret than the controller wrote
			// (own_writes.go): nothing is written.
			retErr, res = nil, ctrl.Result{RequeueAfter: staleCacheRetry}
			return
		}
		// The pool's mirrors (mirror.go) follow what exists, whatever the
		// reconcile decided or failed to do.
		var deleted []string
		if rc.plan != nil && rc.stage == "" && retErr == nil {
			deleted = rc.plan.Delete
		}
		if err := r.syncMirrors(ctx, pool, rc.w, deleted); err != nil {
			observeReconcileError(pool, stageApply)
			retErr = errors.Join(retErr, err)
		}
		r.finish(ctx, rc, retErr)
		if err := r.patchPool(ctx, rc.before, pool); err != nil {
			observeReconcileError(pool, stageStatus)
			retErr = errors.Join(retErr, err)
		}
	}()
	for _, phase := range []struct {
		stage string
		run   func(context.Context, *poolReconcile) error
	}{
		{stageHistory, r.restoreHistory}, // history_archive.go: a moved pool's records
		{stageRead, r.gather},
		{stageRead, r.observePool},
		{stageRead, r.detectExternalForce}, // external.go: before the engine reads the forced rollout time
		{stageDecide, r.decide},
		{stageRead, r.detectExternal},     // external.go: a rollout nodepool did not start
		{stageRead, r.detectExternalSets}, // external_machinesets.go: an edited MachineSet of a Replace pool
		{stageHistory, r.record},
		{stageHistory, r.recordExternal}, // external_record.go
		{stageApply, r.restoreSets},
		{stageApply, r.applyPlan},
		{stageHistory, r.archiveHistory},
	} {
		if err := phase.run(ctx, rc); err != nil {
			rc.stage = phase.stage
			if isConflict(err) {
				rc.stage = stageConflict
			}
			if !errors.Is(err, errStalePool) && !errors.Is(err, errStaleCache) {
				observeReconcileError(pool, rc.stage)
			}
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: rc.plan.RequeueAfter}, nil
}

// poolReconcile is what one reconcile of a pool has read and decided so far.
type poolReconcile struct {
	pool, before *nodepoolv1.NodePool
	in           rollout.Input
	gathered     *inputs.Inputs
	w            *world
	// plan is nil until the engine has decided.
	plan *rollout.Plan
	// stage is the phase that failed, "" when none did.
	stage string
	// external are the external changes found, as recorded
	// (external_record.go).
	external []nodepoolv1.ExternalChange
}

// gather reads and renders the pool's inputs (a bad input is the engine's
// RenderErr, not an error of the reconcile).
func (r *Reconciler) gather(ctx context.Context, rc *poolReconcile) error {
	rc.in = rollout.Input{Pool: rc.pool, Now: r.now(), Settings: r.Settings.engine()}
	// Through the render cache (rendercache.go): no render for unchanged inputs.
	gathered, err := r.latest(ctx, rc.pool, &rc.in)
	if err != nil {
		return err
	}
	rc.gathered = gathered
	if gathered != nil {
		if err := r.watchTemplates(gathered.InfrastructureTemplate); err != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("template edits are seen at the next resync", "reason", err.Error())
		}
	}
	return nil
}

// observePool reads what exists of the pool (MachineDeployment or
// MachineSet, Machines, Secrets, Nodes). Objects of the pool's names that
// it does not own stop the reconcile before anything is written.
func (r *Reconciler) observePool(ctx context.Context, rc *poolReconcile) error {
	w, err := r.observe(ctx, rc.pool, &rc.in)
	if err != nil {
		return err
	}
	rc.w = w
	if err := r.fitsInASecret(rc.pool, &rc.in); err != nil { // rendercache.go
		rc.in.Latest, rc.in.Hashes, rc.in.RenderErr, rc.gathered = nil, payload.Hashes{}, err, nil
	}
	if len(w.Conflicts) > 0 {
		return &conflictError{objects: w.Conflicts}
	}
	return nil
}

// decide asks the engine.
func (r *Reconciler) decide(_ context.Context, rc *poolReconcile) error {
	plan := rollout.Decide(rc.in)
	rc.plan = &plan
	return nil
}

// record writes the record of a rollout before the write that starts it:
// a crash in between leaves a record the next reconcile recognises
// (recordHistory writes one record per rollout), never a rollout without
// one.
//
// A rollout starts only on what the pool says now: the cache's pool can
// lag behind an input's watch (a pause patched a moment before a
// ConfigMap edit whose event came first), so a plan that starts one is
// checked against the pool as the API server has it (freshness.go).
func (r *Reconciler) record(ctx context.Context, rc *poolReconcile) error {
	if rc.plan.Record != nil {
		if err := r.checkFresh(ctx, rc.pool); err != nil {
			return err
		}
	}
	return r.recordHistory(ctx, rc.pool, rc.gathered, *rc.plan)
}

func (r *Reconciler) applyPlan(ctx context.Context, rc *poolReconcile) error {
	return r.apply(ctx, rc.pool, rc.gathered, rc.in.TemplateName, rc.w, *rc.plan)
}

// finish writes onto the pool what the reconcile decided and how it went:
// the plan's annotations, status and conditions (once the engine decided),
// ReconciliationActive, and the plan's events (unless a name conflict
// stopped it: nothing of it happened).
func (r *Reconciler) finish(ctx context.Context, rc *poolReconcile, err error) {
	pool := rc.pool
	var was metav1.Condition
	if c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionReconciliationActive); c != nil {
		was = *c
	}
	if rc.plan != nil {
		for k, v := range rc.plan.Annotations {
			if pool.Annotations == nil {
				pool.Annotations = map[string]string{}
			}
			if v == "" {
				delete(pool.Annotations, k) // a record whose rollout ended (rollout.endRecords)
				continue
			}
			pool.Annotations[k] = v
		}
	}
	r.writeStatus(pool, rc, err)
	if isConflict(err) {
		if was.Reason != nodepoolv1.ReasonNameConflict || was.Message != err.Error() {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, nodepoolv1.EventNameConflict, "Reconcile", "%s", err.Error())
		}
		return
	}
	if rc.plan == nil {
		return
	}
	for _, e := range rc.plan.Events {
		if r.announced(pool, e) {
			continue
		}
		r.Recorder.Eventf(pool, nil, e.Type, e.Reason, "Reconcile", "%s", e.Message)
	}
	observeDrift(pool, rc.in.Now)
	observeWindow(pool, rc.in.Now) // window_metrics.go
	observeHealth(pool, *rc.plan)  // metrics_health.go
	observeDrains(pool, *rc.plan)  // metrics_drain.go
	if err == nil {
		observeInPlace(pool, rc.in.InPlace, *rc.plan)
	}
}

// writeStatus copies the plan's status and conditions onto the pool, and
// says on ReconciliationActive whether the reconcile went through.
func (r *Reconciler) writeStatus(pool *nodepoolv1.NodePool, rc *poolReconcile, err error) {
	st := &pool.Status
	active := metav1.Condition{Type: nodepoolv1.ConditionReconciliationActive, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	if err != nil {
		active.Status, active.Message = metav1.ConditionFalse, err.Error()
		switch {
		case isConflict(err):
			active.Reason = nodepoolv1.ReasonNameConflict
		case rc.stage == stageRead:
			active.Reason = nodepoolv1.ReasonReadFailed
			active.Message = "reading the pool's objects failed, nothing was changed: " + err.Error()
		default:
			active.Reason = nodepoolv1.ReasonApplyFailed
		}
	}
	conditions := []metav1.Condition{active}
	st.Selector = poolSelector(pool)
	if plan := rc.plan; plan != nil {
		st.ObservedGeneration = pool.Generation
		st.Version, st.Updating, st.PendingManagementChanges, st.Nodes = plan.Version, plan.Updating, plan.Pending, plan.Nodes
		st.DesiredReplicas = plan.Decision.Replicas
		st.Maintenance = plan.Maintenance
		st.Drains = plan.Drains
		if plan.Maintenance == nil { // maintenance settings removed: so is their condition
			meta.RemoveStatusCondition(&st.Conditions, nodepoolv1.ConditionMaintenanceWindow)
		}
		if md := rc.in.MachineDeployment; md != nil {
			st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = md.Replicas, md.ReadyReplicas, md.UpToDateReplicas
		}
		st.Rollout = plan.Decision.Standing.Published() // where the pool stands: internal/rollout/standing.go
		st.Rollout.Revision = history.Newest(st.Revisions)
		externalStanding(rc, st) // external_record.go
		conditions = append(plan.Conditions, active)
	}
	for _, c := range conditions {
		c.ObservedGeneration = pool.Generation
		if rc.plan == nil {
			c.ObservedGeneration = st.ObservedGeneration
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// writeMetadata writes the pool's metadata changes since before (its
// finalizer, its Cluster owner reference) as a merge patch that holds the
// version read, as an update would. Not an update: an update sends the
// whole spec as this build encodes it (a nodeDrainTimeout of "2m" comes back
// "2m0s"), which the release's nodepool-controller-writes policy refuses as
// a change of the pool's spec — the pool would never get (or lose) its
// finalizer.
func (r *Reconciler) writeMetadata(ctx context.Context, before, pool *nodepoolv1.NodePool) error {
	return r.Client.Patch(ctx, pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// patchPool writes the pool's metadata and status changes, once.
// A reconcile that changes nothing writes nothing. A metadata patch that
// removes or rewrites a request a person writes (requests.go) holds the
// version it read.
func (r *Reconciler) patchPool(ctx context.Context, before, after *nodepoolv1.NodePool) error {
	status := after.Status.DeepCopy()
	if !equality.Semantic.DeepEqual(before.ObjectMeta, after.ObjectMeta) {
		if err := r.Client.Patch(ctx, after, metadataPatch(before, after)); err != nil {
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

// reconcileDelete deletes the MachineHealthCheck and the MachineDeployment,
// waits for the machines to go, then lets garbage collection take the
// owned Secrets and templates.
func (r *Reconciler) reconcileDelete(ctx context.Context, pool *nodepoolv1.NodePool) (ctrl.Result, error) {
	// The health check goes first: it must not repair machines being deleted.
	if err := r.applyHealthCheck(ctx, pool, false); err != nil { // deleted, whatever the pause
		return ctrl.Result{}, err
	}
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
	if err := r.deleteMirrors(ctx, pool); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cleanupTemplateClones(ctx, pool, nil, true); err != nil {
		r.log(pool).Info("infrastructure template clones not deleted", "reason", err.Error())
	}
	if pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		r.deleteUpdateSecret(ctx, pool)
	}
	if before := pool.DeepCopy(); controllerutil.RemoveFinalizer(pool, nodepoolv1.Finalizer) {
		forgetPool(pool)
		r.archived.Delete(pool.UID)
		r.ownForced.Delete(pool.UID)
		r.checkedSets.Delete(pool.UID)
		r.written.forget(pool)
		return ctrl.Result{}, r.writeMetadata(ctx, before, pool)
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
		// Cluster API's objects wake a pool when what it reads of them
		// changes, not at every status write (capi_watches.go).
		Owns(&clusterv1.MachineDeployment{}, builder.WithPredicates(poolReads)).
		Owns(&clusterv1.MachineHealthCheck{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Secret{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&clusterv1.MachineSet{}, handler.EnqueueRequestsFromMapFunc(byPoolLabel), builder.WithPredicates(poolReads)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(byPoolLabel), builder.WithPredicates(poolReads)).
		WatchesMetadata(configMapMetadata(), handler.EnqueueRequestsFromMapFunc(r.poolsReferencing)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.poolsReferencing)).
		// Only spec and annotation changes: a Cluster's status changes with
		// every machine of it. Annotations: Cluster API's paused annotation (pause.go).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfCluster), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
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
