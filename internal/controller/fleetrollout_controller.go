package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/fleet/selection"
	"nodepool.dev/nodepool/internal/history"
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
	// Cache is what the watches of FleetRollouts, pools and history
	// records read, the cache Client reads through; nil: the manager's. A
	// shard running the fleet's rollouts has one of every namespace
	// (fleetCluster), its manager's holding its own namespaces only.
	Cache cache.Cache
	// MembersIndexed: the cache Client reads through indexes NodePools by
	// the fleet rollouts they are members of (indexFleetMembers), and a
	// reconcile lists its rollout's members only; otherwise it lists every
	// pool and picks them.
	MembersIndexed bool

	// expect holds the per-pool states written and not yet seen in the
	// cache (see expectations.go).
	expect expectations
	// predicted remembers where each rollout's last forecast was made
	// (fleetrollout_predict.go).
	predicted predictions
	// records keeps each member's history record of its trigger until
	// one of its history records changes.
	records records
	// states keeps each member's kept state decoded, until its
	// annotation changes (fleetrollout_expectations.go).
	states states
	// sizes is each fleet rollout's member count at its last reconcile:
	// the time its pools' events are batched over grows with it (batchFor).
	sizes sync.Map
}

// The fleet rollout controller's RBAC: it reads FleetRollouts and patches
// their status; it reads namespaces for spec.namespaceSelector; it patches
// NodePools' annotations with the NodePool controller's patch verb (the
// admission policy refuses any change of their spec).
//
// +kubebuilder:rbac:groups=nodepool.dev,resources=fleetrollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=nodepool.dev,resources=fleetrollouts/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// fleetRecordLists counts the history lists of the fleet rollout
// controller: one per member whose trigger is under way at a reconcile
// (it was one of every pool's history per reconcile).
var fleetRecordLists = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "nodepool_fleetrollout_history_lists_total",
	Help: "Lists of one pool's history records by the fleet rollout controller (one per member whose trigger is under way, per reconcile).",
})

func init() { metrics.Registry.MustRegister(fleetRecordLists) }

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
	c := r.Cache
	if c == nil {
		c = mgr.GetCache()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetrollout").
		// Its own status writes do not wake it again: a reconcile that has
		// more to do asks for it (RequeueAfter), and a person's edit
		// changes the generation (spec) or the annotations.
		WatchesRawSource(source.Kind(c, &nodepoolv1.FleetRollout{}, &handler.TypedEnqueueRequestForObject[*nodepoolv1.FleetRollout]{},
			predicate.Or[*nodepoolv1.FleetRollout](predicate.TypedGenerationChangedPredicate[*nodepoolv1.FleetRollout]{},
				predicate.TypedAnnotationChangedPredicate[*nodepoolv1.FleetRollout]{}, predicate.TypedLabelChangedPredicate[*nodepoolv1.FleetRollout]{}))).
		WatchesRawSource(source.Kind(c, &nodepoolv1.NodePool{}, batched(r.batchFor, func(ctx context.Context, o *nodepoolv1.NodePool) []reconcile.Request {
			return r.rolloutsOf(ctx, o.GetAnnotations())
		}), predicate.TypedFuncs[*nodepoolv1.NodePool]{UpdateFunc: func(e event.TypedUpdateEvent[*nodepoolv1.NodePool]) bool {
			return fleet.FactsChanged(e.ObjectOld, e.ObjectNew)
		}})).
		WatchesRawSource(source.Kind(c, &appsv1.ControllerRevision{}, batched(r.batchFor, func(ctx context.Context, o *appsv1.ControllerRevision) []reconcile.Request {
			name := o.GetLabels()[nodepoolv1.LabelPool]
			if name == "" {
				return nil
			}
			r.records.changed(fleet.Ref{Namespace: o.GetNamespace(), Name: name})
			pool := &nodepoolv1.NodePool{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, pool); err != nil {
				return nil
			}
			return r.rolloutsOf(ctx, pool.Annotations)
		}), predicate.TypedFuncs[*appsv1.ControllerRevision]{UpdateFunc: func(e event.TypedUpdateEvent[*appsv1.ControllerRevision]) bool {
			// A record's outcome is written on it; its other updates
			// (owner references, the cache's resync) say nothing new.
			return !bytes.Equal(e.ObjectOld.Data.Raw, e.ObjectNew.Data.Raw) || !maps.Equal(e.ObjectOld.Annotations, e.ObjectNew.Annotations) ||
				!maps.Equal(e.ObjectOld.Labels, e.ObjectNew.Labels)
		}})).
		WithOptions(opts).
		Complete(r)
}

// rolloutsOf maps a pool to the fleet rollouts in progress it is a member
// of (its per-pool state annotations), and those that have not selected
// their pools yet.
func (r *FleetRolloutReconciler) rolloutsOf(ctx context.Context, annotations map[string]string) []reconcile.Request {
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
		if _, member := annotations[nodepoolv1.FleetRolloutPoolAnnotation(fr.Name)]; fr.Status.StartedAt == nil || member {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(fr)})
		}
	}
	return out
}

// batchFor is how long the events of fleet rollout name are batched over:
// fleet.Batch of its members at its last reconcile.
func (r *FleetRolloutReconciler) batchFor(name string) time.Duration {
	n, _ := r.sizes.Load(name)
	members, _ := n.(int)
	return fleet.Batch(members)
}

// batched enqueues the requests of an object's events the rollout's
// batch (batchFor) later; the queue keeps one of a request already
// waiting.
func batched[T client.Object](batchFor func(string) time.Duration, mapFn func(context.Context, T) []reconcile.Request) handler.TypedEventHandler[T, reconcile.Request] {
	add := func(ctx context.Context, o T, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range mapFn(ctx, o) {
			q.AddAfter(req, batchFor(req.Name))
		}
	}
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
	}
}

func terminal(fr *nodepoolv1.FleetRollout) bool {
	return fr.Status.Phase == nodepoolv1.FleetPhaseComplete || fr.Status.Phase == nodepoolv1.FleetPhaseCancelled
}

// expectationRetry is how soon a rollout is looked at again while the
// cache has not caught up with the controller's own writes.
const expectationRetry = 250 * time.Millisecond

// Reconcile runs one step of a fleet rollout: select (once), observe,
// decide, write the status, then the pools. Each pool keeps its own state
// in the rollout (its annotation FleetRolloutPoolAnnotation(name)): a
// trigger writes that state, the apply-pending time and the fleet-rollout
// annotation in one patch, so a controller that restarts finds either a
// pool triggered with its time or one not triggered at all, never a
// second time. The status, bounded, holds counts and the pools that need
// a person; it is written first, with optimistic locking, and nothing is
// written to the pools after a refused status write.
func (r *FleetRolloutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fr := &nodepoolv1.FleetRollout{}
	if err := r.Client.Get(ctx, req.NamespacedName, fr); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, r.forget(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	now := r.now()
	list, err := r.members(ctx, fr.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	byRef := make(map[fleet.Ref]*nodepoolv1.NodePool, len(list.Items))
	for i := range list.Items {
		byRef[fleet.Ref{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}] = &list.Items[i]
	}
	key := nodepoolv1.FleetRolloutPoolAnnotation(fr.Name)
	if r.expect.waiting(fr.Name, now, func(ref fleet.Ref) (string, bool) {
		p, ok := byRef[ref]
		if !ok {
			return "", false
		}
		v, ok := p.Annotations[key]
		return v, ok
	}) {
		return ctrl.Result{RequeueAfter: expectationRetry}, nil // the cache has not seen our writes yet
	}
	before := fr.DeepCopy()
	if fr.Status.StartedAt == nil {
		return r.start(ctx, fr, before, byRef, now)
	}
	members, pools, err := r.observe(ctx, fr, byRef, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.sizes.Store(fr.Name, len(members))
	res := fleet.Decide(fleet.Input{Name: fr.Name, Spec: fr.Spec, Status: fr.Status, Generation: fr.Generation, Members: members, Pools: pools, Now: now})
	fr.Status = res.Status
	forecasting := r.predict(ctx, fr, byRef, members, res.Store, now)
	if !equality.Semantic.DeepEqual(before.Status, fr.Status) {
		if err := r.Client.Status().Patch(ctx, fr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err // nothing written to the pools: the next reconcile decides again
		}
	}
	err = r.writePools(ctx, fr, byRef, res, now)
	for _, e := range res.Events {
		r.Recorder.Eventf(fr, nil, e.Type, e.Reason, "Rollout", "%s", e.Message)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if terminal(fr) {
		r.sizes.Delete(fr.Name)
		r.states.forget(fr.Name)
		return ctrl.Result{}, nil
	}
	after := r.Resync
	if res.RequeueAfter > 0 && (after == 0 || res.RequeueAfter < after) {
		after = res.RequeueAfter
	}
	if forecasting && (after == 0 || predictionPoll < after) {
		after = predictionPoll // write the forecast once it is done
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// members lists the pools that keep a state in the fleet rollout name,
// through the members' index when the cache has it (MembersIndexed): a
// reconcile then reads its rollout's pools, not every pool of the fleet.
// Without it, every pool (the others have no state in it: observe and
// start look for it).
func (r *FleetRolloutReconciler) members(ctx context.Context, name string) (*nodepoolv1.NodePoolList, error) {
	list := &nodepoolv1.NodePoolList{}
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if r.MembersIndexed {
		opts = append(opts, client.MatchingFields{fleetMembersIndex: name})
	}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	return list, nil
}

// fleetMembersIndex indexes NodePools by the fleet rollouts they keep a
// state in (fleet.RolloutsOf).
const fleetMembersIndex = "fleetrollout.members"

// indexFleetMembers registers fleetMembersIndex with a cache.
func indexFleetMembers(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &nodepoolv1.NodePool{}, fleetMembersIndex, fleetMembers)
}

func fleetMembers(o client.Object) []string {
	pool, ok := o.(*nodepoolv1.NodePool)
	if !ok {
		return nil
	}
	return fleet.RolloutsOf(pool)
}

// start selects the pools: each selected pool gets its wave (a Pending
// state in its annotation), then the status records the start and the
// waves' sizes. A start that stopped half-way (an error, a restart) is
// done again over the same pools: those carrying the annotation already
// are kept in the selection.
func (r *FleetRolloutReconciler) start(ctx context.Context, fr, before *nodepoolv1.FleetRollout, byRef map[fleet.Ref]*nodepoolv1.NodePool, now time.Time) (ctrl.Result, error) {
	refs, err := r.selectPools(ctx, fr)
	if err != nil {
		return ctrl.Result{}, err
	}
	key := nodepoolv1.FleetRolloutPoolAnnotation(fr.Name)
	seen := map[fleet.Ref]bool{}
	for _, ref := range refs {
		seen[ref] = true
	}
	for ref, p := range byRef {
		if _, ok := p.Annotations[key]; ok && !seen[ref] {
			refs = append(refs, ref)
		}
	}
	st, members := fleet.Start(refs, fr.Spec.Waves, metav1.NewTime(now))
	var store []fleet.Store
	for _, m := range members {
		v := fleet.Encode(m)
		if p, ok := byRef[fleet.RefOf(m)]; !ok || p.Annotations[key] != v {
			store = append(store, fleet.Store{Ref: fleet.RefOf(m), Value: v})
		}
	}
	if err := r.writePools(ctx, fr, byRef, fleet.Result{Store: store}, now); err != nil {
		return ctrl.Result{}, err // the status is not written: the next reconcile selects again
	}
	fr.Status = st
	if err := r.Client.Status().Patch(ctx, fr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(fr, nil, corev1.EventTypeNormal, nodepoolv1.EventFleetRolloutStarted, "Select", "%s", st.Message)
	return ctrl.Result{RequeueAfter: expectationRetry}, nil
}

// selectPools lists the pools the selectors match, in the namespaces the
// namespace selector matches, uncached.
func (r *FleetRolloutReconciler) selectPools(ctx context.Context, fr *nodepoolv1.FleetRollout) ([]fleet.Ref, error) {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	return selection.Pools(ctx, reader, fr)
}

// observe reads the members from the pools in the cache (their per-pool
// state annotations), and for a member triggered whose part is not over
// (or that still carries this rollout's fleet-rollout annotation) its
// history record of the trigger. A state that cannot be read is reported
// (a Warning event) and the pool left out: it counts as skipped.
func (r *FleetRolloutReconciler) observe(ctx context.Context, fr *nodepoolv1.FleetRollout, byRef map[fleet.Ref]*nodepoolv1.NodePool, now time.Time) ([]nodepoolv1.FleetRolloutPool, map[fleet.Ref]fleet.Pool, error) {
	var members []nodepoolv1.FleetRolloutPool
	out := map[fleet.Ref]fleet.Pool{}
	live := map[string]bool{}
	key := nodepoolv1.FleetRolloutPoolAnnotation(fr.Name)
	kept := r.states.of(fr.Name)
	defer kept.sweep()
	for ref, pool := range byRef {
		v, member := pool.Annotations[key]
		if !member {
			continue
		}
		sp, ok, err := kept.decode(ref, v)
		if err != nil {
			r.Recorder.Eventf(fr, pool, corev1.EventTypeWarning, nodepoolv1.EventFleetPoolSkipped, "Observe", "%v: the pool is left out", err)
			continue
		}
		if !ok {
			continue
		}
		members = append(members, sp)
		obs := fleet.Observe(pool, now)
		if obs.Fleet != "" && obs.Fleet != fr.Name && !r.drives(ctx, obs.Fleet, live) {
			obs.Fleet = "" // left by a fleet rollout deleted or ended: not driving the pool
		}
		over := sp.State == nodepoolv1.FleetPoolDone || sp.State == nodepoolv1.FleetPoolSkipped
		if sp.TriggeredAt != nil && (!over || obs.Fleet == fr.Name) {
			rec, ok, version := r.records.get(ref, pool.UID, sp.TriggeredAt.Time)
			if !ok {
				crs, err := r.revisions(ctx, ref)
				if err != nil {
					return nil, nil, err
				}
				rec = record(pool, crs, sp.TriggeredAt.Time)
				r.records.keep(ref, pool.UID, sp.TriggeredAt.Time, version, rec)
			}
			obs.Record = rec
		}
		out[ref] = obs
	}
	fleet.SortMembers(members) // Decide's order: it need not sort them again
	return members, out, nil
}

// revisions lists one pool's history records from the cache, no copies,
// through the pool-label index (indexedClient): only the members whose
// trigger is under way are read, each by its own records, never every
// pool's history at each reconcile (which made a fleet rollout's cost
// grow with the square of its pools).
func (r *FleetRolloutReconciler) revisions(ctx context.Context, ref fleet.Ref) ([]*appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ref.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: ref.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing %s's history: %w", ref, err)
	}
	fleetRecordLists.Inc()
	out := make([]*appsv1.ControllerRevision, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
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

// record finds the pool's newest history record that carries out the
// trigger, whoever requested it (see fleet.CarriesOut): once it completes,
// no machine older than the trigger is left.
func record(pool *nodepoolv1.NodePool, crs []*appsv1.ControllerRevision, at time.Time) *fleet.Record {
	var found *fleet.Record
	for _, cr := range crs {
		if !history.IsRecord(pool, cr) {
			continue
		}
		e, err := history.Decode(cr)
		if err != nil || !fleet.CarriesOut(e.Initiator, e.ForcedAt, e.Started, at) {
			continue
		}
		if found == nil || e.Revision > found.Revision {
			var forced *time.Time
			if e.ForcedAt != nil {
				t := e.ForcedAt.UTC()
				forced = &t
			}
			found = &fleet.Record{Revision: e.Revision, Outcome: e.Outcome, Initiator: e.Initiator, ForcedAt: forced}
		}
	}
	return found
}

// poolWrite is what one patch of a pool's annotations carries: its kept
// state, a trigger, a release.
type poolWrite struct {
	store   *string
	trigger *fleet.Trigger
	release *fleet.Release
}

// writePools patches the pools the decision names, a few at a time, one
// patch per pool with its kept state, trigger and release together.
func (r *FleetRolloutReconciler) writePools(ctx context.Context, fr *nodepoolv1.FleetRollout, byRef map[fleet.Ref]*nodepoolv1.NodePool, res fleet.Result, now time.Time) error {
	writes := map[fleet.Ref]*poolWrite{}
	var order []fleet.Ref
	get := func(ref fleet.Ref) *poolWrite {
		if w, ok := writes[ref]; ok {
			return w
		}
		w := &poolWrite{}
		writes[ref], order = w, append(order, ref)
		return w
	}
	for i := range res.Store {
		get(res.Store[i].Ref).store = &res.Store[i].Value
	}
	for i := range res.Triggers {
		get(res.Triggers[i].Ref).trigger = &res.Triggers[i]
	}
	for i := range res.Releases {
		get(res.Releases[i].Ref).release = &res.Releases[i]
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	sem := make(chan struct{}, poolPatchConcurrency)
	for i, ref := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.writePool(ctx, fr, ref, byRef[ref], writes[ref], now)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writePool patches one pool's annotations (a merge patch of metadata
// only; the pool's spec is its owner's): its kept state in the rollout,
// the apply-pending time and the fleet rollout's name to trigger it, or
// their removal to release it. cached is the pool as the decision saw it
// (nil when the cache has not seen it yet).
//
// A release removes what the cached pool shows as the fleet's: a person
// may have written a newer apply-pending since (or taken the pool into
// another fleet rollout). So that patch carries the cached pool's
// resourceVersion: a conflict re-reads the pool, uncached, and removes
// only what is still the fleet's, never a newer request.
func (r *FleetRolloutReconciler) writePool(ctx context.Context, fr *nodepoolv1.FleetRollout, ref fleet.Ref, cached *nodepoolv1.NodePool, w *poolWrite, now time.Time) error {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	for attempt := 1; ; attempt++ {
		ann, lock := poolAnnotations(fr, cached, w)
		if len(ann) == 0 {
			return nil
		}
		md := map[string]any{"annotations": ann}
		if lock {
			md["resourceVersion"] = cached.ResourceVersion
		}
		raw, err := json.Marshal(map[string]any{"metadata": md})
		if err != nil {
			return err
		}
		err = r.Client.Patch(ctx, pool, client.RawPatch(types.MergePatchType, raw))
		if apierrors.IsNotFound(err) {
			return nil // deleted: it counts as skipped
		}
		if lock && apierrors.IsConflict(err) && attempt < releaseAttempts {
			fresh := &nodepoolv1.NodePool{}
			if gerr := r.reader().Get(ctx, client.ObjectKeyFromObject(pool), fresh); gerr != nil {
				if apierrors.IsNotFound(gerr) {
					return nil
				}
				return fmt.Errorf("re-reading %s to release it from fleet rollout %s: %w", ref, fr.Name, gerr)
			}
			cached = fresh
			continue
		}
		if err != nil {
			return fmt.Errorf("writing fleet rollout %s's state on %s: %w", fr.Name, ref, err)
		}
		break
	}
	if w.store != nil {
		r.expect.wrote(fr.Name, ref, *w.store, now)
	}
	if t := w.trigger; t != nil && !t.Retry {
		msg := fmt.Sprintf("fleet rollout %s (%s) triggered the pool: every machine created before %s is replaced",
			fr.Name, fr.Spec.Action, t.At.UTC().Format(time.RFC3339))
		r.Recorder.Eventf(pool, fr, corev1.EventTypeNormal, nodepoolv1.EventFleetPoolTriggered, "Trigger", "%s", msg)
		r.Recorder.Eventf(fr, pool, corev1.EventTypeNormal, nodepoolv1.EventFleetPoolTriggered, "Trigger", "pool %s triggered (apply-pending-at %s)", t.Ref, t.At.UTC().Format(time.RFC3339))
	}
	return nil
}

// releaseAttempts bounds the re-reads of a release that conflicts; the
// last conflict is the reconcile's error, and it is retried.
const releaseAttempts = 4

// poolAnnotations is the merge patch of w's annotations on the pool as
// cached shows it, and whether it removes what cached shows (then the
// patch must hold cached's resourceVersion).
func poolAnnotations(fr *nodepoolv1.FleetRollout, cached *nodepoolv1.NodePool, w *poolWrite) (map[string]any, bool) {
	ann := map[string]any{}
	lock := false
	if w.store != nil {
		ann[nodepoolv1.FleetRolloutPoolAnnotation(fr.Name)] = *w.store
	}
	if t := w.trigger; t != nil {
		ann[nodepoolv1.AnnotationApplyPending] = t.At.UTC().Format(time.RFC3339)
		ann[nodepoolv1.AnnotationFleetRollout] = fr.Name
	}
	if rl := w.release; rl != nil && w.trigger == nil {
		if cached == nil || cached.Annotations[nodepoolv1.AnnotationFleetRollout] == fr.Name {
			ann[nodepoolv1.AnnotationFleetRollout] = nil
			lock = cached != nil
		}
		if rl.At != nil && cached != nil && cached.Annotations[nodepoolv1.AnnotationApplyPending] == rl.At.UTC().Format(time.RFC3339) {
			ann[nodepoolv1.AnnotationApplyPending] = nil
			lock = true
		}
	}
	return ann, lock && cached.ResourceVersion != ""
}

// reader reads uncached when it can.
func (r *FleetRolloutReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// forget removes a deleted fleet rollout's per-pool state from the pools
// (its fleet-rollout annotation stays where it drove a pool: another
// fleet rollout treats it as absent).
func (r *FleetRolloutReconciler) forget(ctx context.Context, name string) error {
	r.expect.forget(name)
	r.predicted.forget(name)
	r.states.forget(name)
	r.sizes.Delete(name)
	list, err := r.members(ctx, name)
	if err != nil {
		return err
	}
	key := nodepoolv1.FleetRolloutPoolAnnotation(name)
	raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		if _, ok := p.Annotations[key]; !ok {
			continue
		}
		pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		if err := r.Client.Patch(ctx, pool, client.RawPatch(types.MergePatchType, raw)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("removing %s from %s/%s: %w", key, p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}
