package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// indexDataSecretName indexes Machines by spec.bootstrap.dataSecretName, so
// a bootstrap data Secret that appears or changes wakes its machines.
const indexDataSecretName = "sim.nodepool.dev/data-secret-name"

// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simmachines;simmachines/status;simmachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.sim.nodepool.dev,resources=simmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes;nodes/status,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;update;patch

// machineReconciler boots SimMachines: user-data, payload, Node.
type machineReconciler struct {
	client client.Client
	// reader reads from the API server, not the cache (machine_adopt.go).
	reader    client.Reader
	workload  WorkloadClusters
	recorder  events.EventRecorder
	fetcher   *fetcher
	backoff   *backoff
	bootDelay time.Duration
	now       func() time.Time
}

func (r *machineReconciler) setupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.Machine{}, indexDataSecretName, func(o client.Object) []string {
		m, ok := o.(*clusterv1.Machine)
		if !ok || m.Spec.Bootstrap.DataSecretName == nil {
			return nil
		}
		return []string{*m.Spec.Bootstrap.DataSecretName}
	})
	if err != nil {
		return fmt.Errorf("indexing Machines by bootstrap data Secret: %w", err)
	}
	log := mgr.GetLogger().WithName("simmachine")
	return ctrl.NewControllerManagedBy(mgr).
		Named("simmachine").
		For(&simv1.SimMachine{}, builder.WithPredicates(specOrMetadataChanged())).
		// A Machine's status changes often while it comes up and means
		// nothing to its SimMachine: only its spec (bootstrap data, version)
		// and annotations (knobs, pause) do.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(simv1.GroupVersion.WithKind(simv1.KindSimMachine))),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToSimMachines)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToSimMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

// Reconcile moves one SimMachine a step through its boot, or keeps its Node
// as the machine's knobs say. The SimMachine is patched once, at the end.
func (r *machineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	sm := &simv1.SimMachine{}
	if err := r.client.Get(ctx, req.NamespacedName, sm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !sm.DeletionTimestamp.IsZero()
	machine, err := util.GetOwnerMachine(ctx, r.client, sm.ObjectMeta)
	if err != nil && !(deleting && apierrors.IsNotFound(err)) {
		return ctrl.Result{}, fmt.Errorf("reading the Machine that owns SimMachine %s: %w", req, err)
	}
	if machine == nil && !deleting {
		// Cluster API sets the owner reference right after creating the
		// SimMachine; that update brings us back.
		return ctrl.Result{}, nil
	}
	var cluster *clusterv1.Cluster
	if machine != nil {
		cluster, err = util.GetClusterByName(ctx, r.client, machine.Namespace, machine.Spec.ClusterName)
		if err != nil && !(deleting && apierrors.IsNotFound(err)) {
			return ctrl.Result{}, fmt.Errorf("reading Cluster %s/%s of SimMachine %s: %w", machine.Namespace, machine.Spec.ClusterName, req, err)
		}
	}
	// A Paused condition just written needs no new reconcile: go on.
	if isPaused, _, err := paused.EnsurePausedCondition(ctx, r.client, cluster, sm); err != nil || isPaused {
		return ctrl.Result{}, err
	}

	if !deleting {
		// Added first and on its own, so the Node is never registered
		// before the SimMachine can clean it up.
		if added, err := finalizers.EnsureFinalizer(ctx, r.client, sm, simv1.MachineFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(sm, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		err := helper.Patch(ctx, sm, patch.WithOwnedConditions{Conditions: []string{
			simv1.ConditionReady, simv1.ConditionBooted, simv1.ConditionNodeHealthy, clusterv1.PausedCondition,
		}})
		if err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, fmt.Errorf("patching SimMachine %s: %w", req, err)})
		}
	}()

	if deleting {
		return r.reconcileDelete(ctx, sm, machine)
	}
	return r.reconcileNormal(ctx, sm, machine)
}

// reconcileNormal boots the machine if it has not booted yet, then keeps
// its Node registered and as healthy as its knobs say.
func (r *machineReconciler) reconcileNormal(ctx context.Context, sm *simv1.SimMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	k, problems := machineKnobs(sm, machine, knobs{bootDelay: r.bootDelay})
	for _, p := range problems {
		log.Info("Ignoring a knob", "problem", p.Error())
	}
	if sm.Status.BootedPayload == "" && sm.Spec.ProviderID != "" {
		// machine_adopt.go: a machine that booted under another management cluster.
		if err := r.adopt(ctx, sm, machine); err != nil {
			log.Info("Not booting a machine that has a providerID before its Node is looked for", "reason", err.Error())
			return ctrl.Result{RequeueAfter: r.retryDelay(ctx, sm, err)}, nil
		}
	}
	if sm.Status.BootedPayload == "" {
		step, err := r.boot(ctx, sm, machine, k)
		if err != nil {
			return ctrl.Result{}, err
		}
		if step.booted == nil {
			r.reportBoot(sm, step)
			return ctrl.Result{RequeueAfter: step.retryAfter}, nil
		}
		// The payload ran: like Ignition, it never runs again on this machine.
		r.backoff.forget(sm.UID)
		sm.Status.BootedPayload = step.booted.Hash
		sm.Status.NodeLabels = step.booted.NodeLabels
		if step.failAfter != nil {
			sm.Status.FailAt = failAtTime(r.now(), *step.failAfter)
		}
	}
	return r.runNode(ctx, sm, machine, k)
}

// reconcileDelete deletes the machine's Node, then lets the SimMachine go.
func (r *machineReconciler) reconcileDelete(ctx context.Context, sm *simv1.SimMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	r.backoff.forget(sm.UID)
	if !controllerutil.ContainsFinalizer(sm, simv1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	setBooted(sm, metav1False, simv1.ReasonDeleting, "the machine is being deleted with its Node")
	if sm.Status.NodeName != "" {
		if err := r.deleteNode(ctx, sm, clusterOf(sm, machine)); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(sm, simv1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// clusterOf names the Cluster of a machine: its Machine's, or, once the
// Machine is gone, the one Cluster API labelled the SimMachine with.
func clusterOf(sm *simv1.SimMachine, machine *clusterv1.Machine) client.ObjectKey {
	if machine != nil {
		return client.ObjectKey{Namespace: machine.Namespace, Name: machine.Spec.ClusterName}
	}
	return client.ObjectKey{Namespace: sm.Namespace, Name: sm.Labels[clusterv1.ClusterNameLabel]}
}

// secretToSimMachines maps a bootstrap data Secret to the SimMachines whose
// Machines name it.
func (r *machineReconciler) secretToSimMachines(ctx context.Context, o client.Object) []reconcile.Request {
	machines := &clusterv1.MachineList{}
	if err := r.client.List(ctx, machines, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexDataSecretName: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Machines of a bootstrap data Secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	toInfra := util.MachineToInfrastructureMapFunc(simv1.GroupVersion.WithKind(simv1.KindSimMachine))
	for i := range machines.Items {
		out = append(out, toInfra(ctx, &machines.Items[i])...)
	}
	return out
}

// clusterToSimMachines maps a Cluster to its SimMachines, so unpausing it
// resumes them.
func (r *machineReconciler) clusterToSimMachines(ctx context.Context, o client.Object) []reconcile.Request {
	list := &simv1.SimMachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the SimMachines of a Cluster", "cluster", client.ObjectKeyFromObject(o))
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, sm := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sm)})
	}
	return out
}

// specOrMetadataChanged lets through every event but an update of the
// status alone: the provider writes the status itself, and reconciling again
// for it would only repeat the last reconcile.
func specOrMetadataChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if o == nil || n == nil {
			return true
		}
		return o.GetGeneration() != n.GetGeneration() ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
			!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
	}}
}
