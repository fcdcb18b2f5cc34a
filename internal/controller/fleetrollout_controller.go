package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// FleetRolloutReconciler runs FleetRollouts: it selects the pools once,
// observes them, asks internal/fleet for the next step, writes the status
// and then annotates the pools that start. It never changes a pool's spec:
// a pool starts through its apply-pending and fleet-rollout annotations.
type FleetRolloutReconciler struct {
	Client client.Client
	// APIReader reads uncached: the one selection of a rollout's pools
	// must see pools labelled a moment before it was created, which the
	// cache may not have yet (nil: the Client).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Clock returns now; nil means time.Now.
	Clock func() time.Time
	// Resync is how often a rollout in progress is looked at without an
	// event (a safety net; pool and history events wake it).
	Resync time.Duration
}

// The fleet rollout controller's RBAC: it reads FleetRollouts and patches
// their status; it reads namespaces for spec.namespaceSelector; it patches
// NodePools' annotations with the NodePool controller's patch verb (the
// admission policy refuses any change of their spec).
//
// +kubebuilder:rbac:groups=nodepool.dev,resources=fleetrollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=nodepool.dev,resources=fleetrollouts/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// poolPatchConcurrency is how many pools one reconcile annotates at once.
const poolPatchConcurrency = 8

func (r *FleetRolloutReconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// SetupWithManager watches FleetRollouts, and the pools and history
// records of the rollouts that hold them.
func (r *FleetRolloutReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	opts.MaxConcurrentReconciles = 1
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetrollout").
		For(&nodepoolv1.FleetRollout{}).
		Watches(&nodepoolv1.NodePool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.rolloutsOf(ctx, o.GetNamespace(), o.GetName())
		})).
		Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[nodepoolv1.LabelPool]; pool != "" {
				return r.rolloutsOf(ctx, o.GetNamespace(), pool)
			}
			return nil
		})).
		WithOptions(opts).
		Complete(r)
}

// rolloutsOf maps a pool to the fleet rollouts in progress that hold it
// (or have not selected their pools yet).
func (r *FleetRolloutReconciler) rolloutsOf(ctx context.Context, namespace, name string) []reconcile.Request {
	list := &nodepoolv1.FleetRolloutList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		fr := &list.Items[i]
		if terminal(fr) {
			continue
		}
		if fr.Status.StartedAt == nil || holds(fr, namespace, name) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(fr)})
		}
	}
	return out
}

func terminal(fr *nodepoolv1.FleetRollout) bool {
	return fr.Status.Phase == nodepoolv1.FleetPhaseComplete || fr.Status.Phase == nodepoolv1.FleetPhaseCancelled
}

func holds(fr *nodepoolv1.FleetRollout, namespace, name string) bool {
	for _, p := range fr.Status.Pools {
		if p.Namespace == namespace && p.Name == name {
			return true
		}
	}
	return false
}

// Reconcile runs one step of a fleet rollout: select (once), observe,
// decide, write the status, then annotate and release pools. The status
// is written first, with optimistic locking: a trigger is recorded (with
// its time) before the pool is annotated, so a controller that restarts in
// between writes the same time again, never a second rollout.
func (r *FleetRolloutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fr := &nodepoolv1.FleetRollout{}
	if err := r.Client.Get(ctx, req.NamespacedName, fr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	before := fr.DeepCopy()
	if fr.Status.StartedAt == nil {
		refs, err := r.selectPools(ctx, fr)
		if err != nil {
			return ctrl.Result{}, err
		}
		fr.Status = fleet.Start(refs, fr.Spec.Waves, metav1.NewTime(now))
		r.Recorder.Eventf(fr, nil, corev1.EventTypeNormal, nodepoolv1.EventFleetRolloutStarted, "Select", "%s", fr.Status.Message)
	}
	pools, err := r.observe(ctx, fr, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := fleet.Decide(fleet.Input{Name: fr.Name, Spec: fr.Spec, Status: fr.Status, Generation: fr.Generation, Pools: pools, Now: now})
	fr.Status = res.Status
	if !equality.Semantic.DeepEqual(before.Status, fr.Status) {
		if err := r.Client.Status().Patch(ctx, fr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err // nothing annotated: the next reconcile decides again
		}
	}
	// The pools are independent: patch them a few at a time.
	errs := make([]error, len(res.Triggers)+len(res.Releases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, poolPatchConcurrency)
	for i := range errs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if i < len(res.Triggers) {
				errs[i] = r.trigger(ctx, fr, res.Triggers[i])
			} else {
				errs[i] = r.release(ctx, fr, res.Releases[i-len(res.Triggers)])
			}
		}()
	}
	wg.Wait()
	for _, e := range res.Events {
		r.Recorder.Eventf(fr, nil, e.Type, e.Reason, "Rollout", "%s", e.Message)
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if terminal(fr) {
		return ctrl.Result{}, nil
	}
	after := r.Resync
	if res.RequeueAfter > 0 && (after == 0 || res.RequeueAfter < after) {
		after = res.RequeueAfter
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// selectPools lists the pools the selectors match, in the namespaces the
// namespace selector matches.
func (r *FleetRolloutReconciler) selectPools(ctx context.Context, fr *nodepoolv1.FleetRollout) ([]fleet.Ref, error) {
	poolSel, err := selector(fr.Spec.PoolSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.poolSelector: %w", err)
	}
	nsSel, err := selector(fr.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	var namespaces map[string]bool
	if !nsSel.Empty() {
		list := &corev1.NamespaceList{}
		if err := reader.List(ctx, list, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		namespaces = map[string]bool{}
		for _, ns := range list.Items {
			namespaces[ns.Name] = true
		}
	}
	list := &nodepoolv1.NodePoolList{}
	if err := reader.List(ctx, list, client.MatchingLabelsSelector{Selector: poolSel}); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var refs []fleet.Ref
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() && (namespaces == nil || namespaces[p.Namespace]) {
			refs = append(refs, fleet.Ref{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return refs, nil
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// observe reads the selected pools from the cache (one list, no copies),
// and for a pool triggered whose part is not over (or that still carries
// this rollout's annotation) its history record of the trigger.
func (r *FleetRolloutReconciler) observe(ctx context.Context, fr *nodepoolv1.FleetRollout, now time.Time) (map[fleet.Ref]fleet.Pool, error) {
	list := &nodepoolv1.NodePoolList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	byRef := make(map[fleet.Ref]*nodepoolv1.NodePool, len(list.Items))
	for i := range list.Items {
		byRef[fleet.Ref{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}] = &list.Items[i]
	}
	var revisions map[fleet.Ref][]*appsv1.ControllerRevision
	out := make(map[fleet.Ref]fleet.Pool, len(fr.Status.Pools))
	live := map[string]bool{}
	for _, sp := range fr.Status.Pools {
		ref := fleet.RefOf(sp)
		pool, ok := byRef[ref]
		if !ok {
			out[ref] = fleet.Pool{}
			continue
		}
		obs := observeFleetPool(pool, now)
		if obs.Fleet != "" && obs.Fleet != fr.Name && !r.drives(ctx, obs.Fleet, live) {
			obs.Fleet = "" // left by a fleet rollout deleted or ended: not driving the pool
		}
		over := sp.State == nodepoolv1.FleetPoolDone || sp.State == nodepoolv1.FleetPoolSkipped
		if sp.TriggeredAt != nil && (!over || obs.Fleet == fr.Name) {
			if revisions == nil {
				var err error
				if revisions, err = r.revisions(ctx); err != nil {
					return nil, err
				}
			}
			obs.Record = record(pool, revisions[ref], sp.TriggeredAt.Time)
		}
		out[ref] = obs
	}
	return out, nil
}

// revisions lists the pools' history records (every namespace, one list
// from the cache, no copies), by pool.
func (r *FleetRolloutReconciler) revisions(ctx context.Context) (map[fleet.Ref][]*appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, list, client.HasLabels{nodepoolv1.LabelPool}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pools' history: %w", err)
	}
	out := map[fleet.Ref][]*appsv1.ControllerRevision{}
	for i := range list.Items {
		cr := &list.Items[i]
		ref := fleet.Ref{Namespace: cr.Namespace, Name: cr.Labels[nodepoolv1.LabelPool]}
		out[ref] = append(out[ref], cr)
	}
	return out, nil
}

// drives reports whether the fleet rollout name exists and has not ended
// (memoised in live for one reconcile).
func (r *FleetRolloutReconciler) drives(ctx context.Context, name string, live map[string]bool) bool {
	if v, ok := live[name]; ok {
		return v
	}
	other := &nodepoolv1.FleetRollout{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, other)
	live[name] = err == nil && !terminal(other) || err != nil && client.IgnoreNotFound(err) != nil
	return live[name]
}

// observeFleetPool is what a fleet rollout reads of a pool: its status,
// conditions and annotations.
func observeFleetPool(pool *nodepoolv1.NodePool, now time.Time) fleet.Pool {
	st := pool.Status
	falseCond := func(t string) *fleet.Condition {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionFalse {
			return &fleet.Condition{Reason: c.Reason, Message: c.Message}
		}
		return nil
	}
	desired := st.DesiredReplicas
	at, outside := pool.Annotations[rollout.AnnotationApplyPending], ""
	if at != "" && pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] == at {
		outside = pool.Annotations[nodepoolv1.AnnotationOutsideWindowsReason]
	}
	return fleet.Pool{
		Exists:    pool.DeletionTimestamp.IsZero(),
		HasDrift:  len(st.PendingManagementChanges) > 0,
		Paused:    poolmath.PauseAt(pool, now).Paused,
		Updating:  st.Updating != "",
		Held:      falseCond(nodepoolv1.ConditionMaintenanceWindow),
		Unhealthy: falseCond(nodepoolv1.ConditionRolloutHealthy),
		Ready:     meta.IsStatusConditionTrue(st.Conditions, nodepoolv1.ConditionReady),
		Settled: st.ObservedGeneration == pool.Generation && st.Updating == "" &&
			st.Replicas == desired && st.UpdatedReplicas == desired && st.ReadyReplicas == desired,
		Replicas:      st.Replicas,
		Fleet:         pool.Annotations[nodepoolv1.AnnotationFleetRollout],
		At:            at,
		OutsideReason: outside,
	}
}

// record finds the pool's newest history record of a forced rollout at
// or after the trigger, whoever requested it (the trigger itself, a drift
// deadline, a newer rolloutAfter, a hand apply-pending): once it
// completes, no machine older than the trigger is left.
func record(pool *nodepoolv1.NodePool, crs []*appsv1.ControllerRevision, at time.Time) *fleet.Record {
	var found *fleet.Record
	for _, cr := range crs {
		if !history.IsRecord(pool, cr) {
			continue
		}
		e, err := history.Decode(cr)
		if err != nil || e.ForcedAt == nil || e.ForcedAt.Before(at) {
			continue
		}
		if found == nil || e.Revision > found.Revision {
			forced := e.ForcedAt.UTC()
			found = &fleet.Record{Revision: e.Revision, Outcome: e.Outcome, Initiator: e.Initiator, ForcedAt: &forced}
		}
	}
	return found
}

// trigger annotates a pool to roll: the apply-pending time and the fleet
// rollout's name (a metadata patch; the pool's spec is its owner's).
func (r *FleetRolloutReconciler) trigger(ctx context.Context, fr *nodepoolv1.FleetRollout, t fleet.Trigger) error {
	pool := &nodepoolv1.NodePool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, pool); err != nil {
		return client.IgnoreNotFound(err)
	}
	before := pool.DeepCopy()
	if pool.Annotations == nil {
		pool.Annotations = map[string]string{}
	}
	pool.Annotations[rollout.AnnotationApplyPending] = t.At.UTC().Format(time.RFC3339)
	pool.Annotations[nodepoolv1.AnnotationFleetRollout] = fr.Name
	if err := r.Client.Patch(ctx, pool, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("annotating %s to roll: %w", t.Ref, err)
	}
	if t.Retry {
		return nil
	}
	msg := fmt.Sprintf("fleet rollout %s (%s) triggered the pool: every machine created before %s is replaced",
		fr.Name, fr.Spec.Action, t.At.UTC().Format(time.RFC3339))
	r.Recorder.Eventf(pool, fr, corev1.EventTypeNormal, nodepoolv1.EventFleetPoolTriggered, "Trigger", "%s", msg)
	r.Recorder.Eventf(fr, pool, corev1.EventTypeNormal, nodepoolv1.EventFleetPoolTriggered, "Trigger", "pool %s triggered (apply-pending-at %s)", t.Ref, t.At.UTC().Format(time.RFC3339))
	return nil
}

// release removes the fleet rollout's annotation from a pool whose part is
// over, and the apply-pending time it wrote when the rollout never started.
func (r *FleetRolloutReconciler) release(ctx context.Context, fr *nodepoolv1.FleetRollout, rl fleet.Release) error {
	pool := &nodepoolv1.NodePool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rl.Namespace, Name: rl.Name}, pool); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pool.Annotations[nodepoolv1.AnnotationFleetRollout] != fr.Name {
		return nil
	}
	before := pool.DeepCopy()
	delete(pool.Annotations, nodepoolv1.AnnotationFleetRollout)
	if rl.At != nil && pool.Annotations[rollout.AnnotationApplyPending] == rl.At.UTC().Format(time.RFC3339) {
		delete(pool.Annotations, rollout.AnnotationApplyPending)
	}
	if err := r.Client.Patch(ctx, pool, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("releasing %s: %w", rl.Ref, err)
	}
	return nil
}
