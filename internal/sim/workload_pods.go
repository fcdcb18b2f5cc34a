package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
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

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// The workloads a sim Node runs (spec.workloads, annotation
// sim.nodepool.dev/workloads), so that drains have pods to evict through
// the real Eviction API. A SimMachine asks for some; once its Node is
// registered and schedulable the sim places them on it, in the machine's
// namespace of the workload cluster:
//
//	guarded        a pod of the ReplicaSet sim-guarded, under the
//	               PodDisruptionBudget sim-guarded (maxUnavailable 0):
//	               every eviction is refused until the budget is changed
//	bare           a pod no controller owns: placed once, never again
//	slow=<d>       a pod of the ReplicaSet sim-slow whose termination grace
//	               period is d, all of which it takes to stop
//	local          a pod of the ReplicaSet sim-local with an emptyDir volume
//	daemon         a pod of the DaemonSet sim-daemon (drains skip it)
//
// The workload cluster has no scheduler, kubelet or controller manager, so
// the sim plays the parts a drain needs: a kubelet for the pods on its
// Nodes (running and Ready; a terminating pod is removed when it has
// stopped: at once, or for slow at the end of its grace period), the pod
// garbage collector (pods of a deleted Node are removed) and the
// disruption controller (the status of PodDisruptionBudgets, which the
// Eviction API reads). No ReplicaSet controller runs: an evicted pod comes
// back only when its Node is schedulable again, where it was.

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups=apps,resources=replicasets;daemonsets,verbs=get;create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets/status,verbs=update

// Workload kinds.
const (
	workloadGuarded = "guarded"
	workloadBare    = "bare"
	workloadSlow    = "slow"
	workloadLocal   = "local"
	workloadDaemon  = "daemon"
)

// GuardedBudget is the PodDisruptionBudget over the guarded pods of a
// namespace; the sim creates it with maxUnavailable 0 and never changes it
// again, so a test or a demo can release the block by editing it.
const GuardedBudget = "sim-guarded"

// maxWorkloadGrace bounds slow's grace period.
const maxWorkloadGrace = 24 * time.Hour

// workload is one pod a Node runs.
type workload struct {
	kind string
	// grace is slow's termination grace period.
	grace time.Duration
}

// parseWorkloads reads a spec.workloads value.
func parseWorkloads(s string) ([]workload, error) {
	var out []workload
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, arg, hasArg := strings.Cut(item, "=")
		w := workload{kind: kind}
		switch kind {
		case workloadGuarded, workloadBare, workloadLocal, workloadDaemon:
			if hasArg {
				return nil, fmt.Errorf("workload %q takes no value", item)
			}
		case workloadSlow:
			d, err := time.ParseDuration(arg)
			if !hasArg || err != nil || d < time.Second || d > maxWorkloadGrace {
				return nil, fmt.Errorf("workload %q: slow needs a grace period between 1s and %s, such as slow=90s", item, maxWorkloadGrace)
			}
			w.grace = d
		default:
			return nil, fmt.Errorf("unknown workload %q: use guarded, bare, slow=<duration>, local or daemon", kind)
		}
		if seen[kind] {
			return nil, fmt.Errorf("workload %q is listed twice", kind)
		}
		seen[kind] = true
		out = append(out, w)
	}
	return out, nil
}

// workloadPodName is the name of machine sm's pod of kind.
func workloadPodName(sm string, kind string) string {
	return sm + "-" + kind
}

// workloadPod is the pod of w on sm's Node, owned by owner (nil: none).
func workloadPod(sm *simv1.SimMachine, node string, w workload, owner *metav1.OwnerReference) *corev1.Pod {
	grace := int64(30)
	if w.kind == workloadSlow {
		grace = int64(w.grace / time.Second)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sm.Namespace,
			Name:      workloadPodName(sm.Name, w.kind),
			Labels:    map[string]string{simv1.LabelWorkload: w.kind, simv1.LabelWorkloadNode: sm.Name},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if w.kind == workloadLocal {
		pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	}
	return pod
}

// workloadPlacer puts the pods a SimMachine asks for on its Node.
type workloadPlacer struct {
	client   client.Client
	nodes    client.Reader
	workload WorkloadClusters
	defaults knobs
}

func (r *workloadPlacer) setupWithManager(mgr ctrl.Manager, wl cluster.Cluster, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simworkloads").
		For(&simv1.SimMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(simv1.GroupVersion.WithKind(simv1.KindSimMachine))),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.Node{},
			handler.TypedEnqueueRequestsFromMapFunc(nodeToSimMachine), nodeSchedulingChanged())).
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.Pod{},
			handler.TypedEnqueueRequestsFromMapFunc(podToSimMachine), podGone())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

func (r *workloadPlacer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sm := &simv1.SimMachine{}
	if err := r.client.Get(ctx, req.NamespacedName, sm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sm.DeletionTimestamp.IsZero() || sm.Status.NodeName == "" {
		return ctrl.Result{}, nil
	}
	machine, err := util.GetOwnerMachine(ctx, r.client, sm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading the Machine that owns SimMachine %s: %w", req, err)
	}
	k, _ := machineKnobs(sm, machine, r.defaults) // the machine reconciler logs bad knobs
	if len(k.workloads) == 0 {
		return ctrl.Result{}, nil
	}
	node := &corev1.Node{}
	if err := r.nodes.Get(ctx, client.ObjectKey{Name: sm.Status.NodeName}, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID != providerID(sm) || node.Spec.Unschedulable || !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // a cordoned Node takes no new pods
	}
	wc, err := r.workload.GetClient(ctx, clusterOf(sm, machine))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("cannot reach the workload cluster to place pods: %w", err)
	}
	placed := map[string]bool{}
	for _, kind := range strings.Split(node.Annotations[simv1.AnnotationWorkloadsPlaced], ",") {
		placed[kind] = kind != ""
	}
	if err := ensureNamespace(ctx, wc, sm.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	changed := false
	for _, w := range k.workloads {
		if w.kind == workloadBare && placed[w.kind] {
			continue // never recreated: nothing owns it
		}
		owner, err := ensureWorkloadOwner(ctx, wc, sm.Namespace, w.kind)
		if err != nil {
			return ctrl.Result{}, err
		}
		pod := workloadPod(sm, node.Name, w, owner)
		if err := wc.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("placing pod %s/%s on Node %s: %w", pod.Namespace, pod.Name, node.Name, err)
		}
		if !placed[w.kind] {
			placed[w.kind], changed = true, true
		}
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	var kinds []string
	for _, w := range k.workloads {
		if placed[w.kind] {
			kinds = append(kinds, w.kind)
		}
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[simv1.AnnotationWorkloadsPlaced] = strings.Join(kinds, ",")
	return ctrl.Result{}, client.IgnoreNotFound(wc.Patch(ctx, node, patch))
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		ns.Name = name
		err = c.Create(ctx, ns)
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s of the workload pods: %w", name, err)
	}
	return nil
}

// ensureWorkloadOwner makes the ReplicaSet or DaemonSet (and for guarded the
// PodDisruptionBudget) of kind's pods in namespace if they are missing,
// and returns the controller reference of its pods; nil for bare.
func ensureWorkloadOwner(ctx context.Context, c client.Client, namespace, kind string) (*metav1.OwnerReference, error) {
	if kind == workloadBare {
		return nil, nil
	}
	name := "sim-" + kind
	labels := map[string]string{simv1.LabelWorkload: kind}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	var owner client.Object
	var gvk = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	if kind == workloadDaemon {
		gvk = appsv1.SchemeGroupVersion.WithKind("DaemonSet")
		owner = &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	} else {
		owner = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	}
	if err := getOrCreate(ctx, c, owner); err != nil {
		return nil, fmt.Errorf("%s %s/%s of the workload pods: %w", gvk.Kind, namespace, name, err)
	}
	if kind == workloadGuarded {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: GuardedBudget},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
		if err := getOrCreate(ctx, c, pdb); err != nil {
			return nil, fmt.Errorf("PodDisruptionBudget %s/%s of the guarded pods: %w", namespace, GuardedBudget, err)
		}
	}
	return &metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}, nil
}

// getOrCreate reads obj by its key, creating it as given when missing.
func getOrCreate(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		if err = c.Create(ctx, obj); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
	}
	return err
}

// podToSimMachine maps a workload pod to the SimMachine it was placed for.
func podToSimMachine(_ context.Context, p *corev1.Pod) []reconcile.Request {
	name := p.Labels[simv1.LabelWorkloadNode]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: name}}}
}

// podGone lets through the deletions of workload pods (one may come back).
func podGone() predicate.TypedPredicate[*corev1.Pod] {
	return predicate.TypedFuncs[*corev1.Pod]{
		CreateFunc: func(event.TypedCreateEvent[*corev1.Pod]) bool { return false },
		UpdateFunc: func(event.TypedUpdateEvent[*corev1.Pod]) bool { return false },
		DeleteFunc: func(e event.TypedDeleteEvent[*corev1.Pod]) bool {
			return e.Object.Labels[simv1.LabelWorkloadNode] != ""
		},
		GenericFunc: func(event.TypedGenericEvent[*corev1.Pod]) bool { return false },
	}
}

// nodeSchedulingChanged lets through Nodes that appear, are cordoned or
// uncordoned.
func nodeSchedulingChanged() predicate.TypedPredicate[*corev1.Node] {
	return predicate.TypedFuncs[*corev1.Node]{
		CreateFunc: func(event.TypedCreateEvent[*corev1.Node]) bool { return true },
		UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Node]) bool {
			return e.ObjectOld.Spec.Unschedulable != e.ObjectNew.Spec.Unschedulable
		},
		DeleteFunc:  func(event.TypedDeleteEvent[*corev1.Node]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*corev1.Node]) bool { return false },
	}
}
