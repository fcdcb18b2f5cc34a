package sim

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simmachines;simmachines/status,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;update;patch

// agentReconciler is the node agent of every booted SimMachine: it takes
// part in the node update protocol on the machine's Node (agent_plan.go).
// Like a real node's agent it ignores Cluster API's pause: it answers the
// Node, not the Machine.
type agentReconciler struct {
	// client reads SimMachines and Machines (the manager's cache) and
	// writes SimMachine status.
	client client.Client
	// nodes reads Nodes from the workload cluster's cache and writes them.
	nodes client.Client
	// secrets reads update Secrets from the workload cluster, uncached.
	secrets  client.Reader
	recorder events.EventRecorder
	fetcher  *fetcher
	backoff  *backoff
	// defaults are the provider's default knobs (the update delay).
	defaults knobs
	now      func() time.Time

	mu sync.Mutex
	// retries holds, per machine, when a failed attempt at a desired
	// payload may be made again, so events in between do not hurry it.
	retries map[types.UID]pendingRetry
}

type pendingRetry struct {
	desired string
	at      time.Time
}

// newWorkloadCluster connects to the workload cluster where the Nodes live.
// Its cache holds Nodes only, stripped of managed fields; every other read
// fails unless it goes through the API reader, as update Secrets do.
func newWorkloadCluster(cfg *rest.Config, scheme *runtime.Scheme) (cluster.Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "nodepool-sim-agent"
	return cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache = cache.Options{ReaderFailOnMissingInformer: true, DefaultTransform: cache.TransformStripManagedFields()}
		o.Client = client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
	})
}

func (r *agentReconciler) setupWithManager(mgr ctrl.Manager, workload cluster.Cluster, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simagent").
		For(&simv1.SimMachine{}, builder.WithPredicates(agentMachineChanged())).
		// Knobs on the Machine (fail-update, update-delay).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(simv1.GroupVersion.WithKind(simv1.KindSimMachine))),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		WatchesRawSource(source.Kind(workload.GetCache(), &corev1.Node{},
			handler.TypedEnqueueRequestsFromMapFunc(nodeToSimMachine), nodeAsksForUpdate())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

// Reconcile answers the update asked of one machine's Node, one step at a
// time: each step is a write of the Node (or a wait) that brings the next
// reconcile.
func (r *agentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	sm := &simv1.SimMachine{}
	if err := r.client.Get(ctx, req.NamespacedName, sm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sm.DeletionTimestamp.IsZero() {
		r.forget(sm.UID)
		return ctrl.Result{}, nil
	}
	if sm.Status.BootedPayload == "" || sm.Status.NodeName == "" {
		return ctrl.Result{}, nil
	}
	node := &corev1.Node{}
	if err := r.nodes.Get(ctx, client.ObjectKey{Name: sm.Status.NodeName}, node); err != nil {
		// A Node registered again brings the machine back.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID != providerID(sm) {
		return ctrl.Result{}, nil
	}
	machine, err := util.GetOwnerMachine(ctx, r.client, sm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading the Machine that owns SimMachine %s: %w", req, err)
	}
	k, _ := machineKnobs(sm, machine, r.defaults) // the machine reconciler logs bad knobs

	u := readNodeUpdate(node)
	now := r.now()
	plan := planUpdate(u, k, r.retryAt(sm.UID, u.desired), now)
	log.V(1).Info("Node update", "node", node.Name, "desired", payload.Short(u.desired), "state", u.state, "action", plan.action.String())
	switch plan.action {
	case agentIdle:
		r.forget(sm.UID)
		return ctrl.Result{}, nil
	case agentForget:
		r.forget(sm.UID)
		before := node.DeepCopy()
		setAnnotations(node, map[string]*string{simv1.AnnotationUpdateStarted: nil})
		if err := r.nodes.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("forgetting the update given up on Node %s: %w", node.Name, err)
		}
		return ctrl.Result{}, nil
	case agentWait:
		return ctrl.Result{RequeueAfter: plan.after}, nil
	case agentFail:
		r.forget(sm.UID)
		if err := r.degrade(ctx, sm, node, u, plan.message, nil); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	case agentStart:
		r.forget(sm.UID)
		if _, err := r.reportState(ctx, node, nodepoolv1.UpdateStateWorking, "", ptr.To(now.UTC().Format(time.RFC3339Nano))); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Updating in place", "node", node.Name, "payload", payload.Short(u.desired), "updateDelay", k.updateDelay.String())
		return ctrl.Result{RequeueAfter: k.updateDelay}, nil
	}

	outcome, err := r.fetchUpdate(ctx, node, u.desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if outcome.booted == nil {
		delay := r.retryLater(sm.UID, u.desired)
		log.V(1).Info("Update attempt failed, retrying", "node", node.Name, "state", outcome.state, "message", outcome.message, "retryAfter", delay.String())
		if outcome.state == nodepoolv1.UpdateStateDegraded {
			err = r.degrade(ctx, sm, node, u, outcome.message, ptr.To(node.Annotations[simv1.AnnotationUpdateStarted]))
		} else {
			_, err = r.reportState(ctx, node, outcome.state, outcome.message, ptr.To(node.Annotations[simv1.AnnotationUpdateStarted]))
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: delay}, nil
	}
	if err := r.apply(ctx, sm, node, outcome.booted, outcome.failAfter); err != nil {
		if apierrors.IsConflict(err) {
			// The Node changed since it was read: its event brings it back.
			log.V(1).Info("The Node changed while updating, looking again", "node", node.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	r.forget(sm.UID)
	from := u.current
	if from == "" {
		from = sm.Status.BootedPayload
	}
	log.Info("Updated in place", "node", node.Name, "from", payload.Short(from), "to", payload.Short(outcome.booted.Hash))
	r.recorder.Eventf(sm, nil, corev1.EventTypeNormal, simv1.ReasonUpdatedInPlace, "Update",
		"Node %s updated in place from payload %s to %s", node.Name, payload.Short(from), payload.Short(outcome.booted.Hash))
	return ctrl.Result{}, nil
}

// degrade reports Degraded with message, and says so in an Event when the
// Node did not already say it.
func (r *agentReconciler) degrade(ctx context.Context, sm *simv1.SimMachine, node *corev1.Node, u nodeUpdate, message string, started *string) error {
	if _, err := r.reportState(ctx, node, nodepoolv1.UpdateStateDegraded, message, started); err != nil {
		return err
	}
	if u.state != nodepoolv1.UpdateStateDegraded || u.message != message {
		ctrl.LoggerFrom(ctx).Info("Update degraded", "node", node.Name, "payload", payload.Short(u.desired), "message", message)
		r.recorder.Eventf(sm, nil, corev1.EventTypeWarning, simv1.ReasonUpdateDegraded, "Update",
			"Node %s cannot update to payload %s: %s", node.Name, payload.Short(u.desired), message)
	}
	return nil
}

// retryAt is when a failed attempt at desired may be made again (zero:
// now, or no attempt failed).
func (r *agentReconciler) retryAt(uid types.UID, desired string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.retries[uid]; ok && p.desired == desired {
		return p.at
	}
	return time.Time{}
}

// retryLater counts a failed attempt at desired and returns the delay
// before the next one.
func (r *agentReconciler) retryLater(uid types.UID, desired string) time.Duration {
	delay, _ := r.backoff.next(uid)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries[uid] = pendingRetry{desired: desired, at: r.now().Add(delay)}
	return delay
}

// forget drops a machine's failed attempts, once its update is done,
// started over or told to fail, or it is gone.
func (r *agentReconciler) forget(uid types.UID) {
	r.backoff.forget(uid)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.retries, uid)
}

// nodeToSimMachine maps a Node of the sim (providerID
// sim://<namespace>/<name>) to its SimMachine.
func nodeToSimMachine(_ context.Context, n *corev1.Node) []reconcile.Request {
	rest, ok := strings.CutPrefix(n.Spec.ProviderID, simv1.ProviderIDPrefix)
	if !ok {
		return nil
	}
	namespace, name, ok := strings.Cut(rest, "/")
	if !ok || namespace == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

// nodeAsksForUpdate lets through the Nodes the controller asked to update,
// when they appear or their annotations change (the controller's ask, the
// agent's own steps), and those it stopped asking; status updates mean
// nothing to the agent.
func nodeAsksForUpdate() predicate.TypedPredicate[*corev1.Node] {
	asks := func(n *corev1.Node) bool { return n.Annotations[nodepoolv1.AnnotationDesiredPayload] != "" }
	return predicate.TypedFuncs[*corev1.Node]{
		CreateFunc: func(e event.TypedCreateEvent[*corev1.Node]) bool { return asks(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Node]) bool {
			return (asks(e.ObjectNew) || asks(e.ObjectOld)) && !maps.Equal(e.ObjectOld.Annotations, e.ObjectNew.Annotations)
		},
		DeleteFunc:  func(event.TypedDeleteEvent[*corev1.Node]) bool { return false },
		GenericFunc: func(e event.TypedGenericEvent[*corev1.Node]) bool { return asks(e.Object) },
	}
}

// agentMachineChanged lets through a SimMachine's changes that matter to
// its agent: knobs (spec, annotations), its boot and Node, its deletion.
func agentMachineChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*simv1.SimMachine)
			n, ok2 := e.ObjectNew.(*simv1.SimMachine)
			if !ok1 || !ok2 {
				return true
			}
			return o.Generation != n.Generation || !maps.Equal(o.Annotations, n.Annotations) ||
				!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
				o.Status.BootedPayload != n.Status.BootedPayload || o.Status.NodeName != n.Status.NodeName
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}
