package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// podNodeField indexes the workload cluster's pods by spec.nodeName.
const podNodeField = "spec.nodeName"

// disruptedPodTimeout is how long the disruption controller counts a pod
// the Eviction API let go as disrupted before it is deleting (the
// kube-controller-manager's DeletionTimeout).
const disruptedPodTimeout = 2 * time.Minute

// kubeletReconciler plays the kubelet of the sim's Nodes for their pods,
// and the pod garbage collector for the pods the sim placed.
type kubeletReconciler struct {
	cache  client.Reader
	client client.Client
	now    func() time.Time
}

func (r *kubeletReconciler) setupWithManager(ctx context.Context, mgr ctrl.Manager, wl cluster.Cluster, concurrency int) error {
	if err := wl.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podNodeField, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("indexing the workload cluster's pods by node: %w", err)
	}
	nodePods := func(ctx context.Context, n *corev1.Node) []reconcile.Request {
		pods := &corev1.PodList{}
		if err := r.cache.List(ctx, pods, client.MatchingFields{podNodeField: n.Name}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range pods.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return out
	}
	return builder.TypedControllerManagedBy[reconcile.Request](mgr).
		Named("simkubelet").
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{})).
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.Node{}, handler.TypedEnqueueRequestsFromMapFunc(nodePods))).
		WithOptions(controller.TypedOptions[reconcile.Request]{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

func (r *kubeletReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.cache.Get(ctx, req.NamespacedName, pod); err != nil || pod.Spec.NodeName == "" {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	node := &corev1.Node{}
	if err := r.cache.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if pod.Labels[simv1.LabelWorkloadNode] == "" {
			return ctrl.Result{}, nil // not ours; its node may come
		}
		// The pod garbage collector: the Node is gone, so is the pod.
		return ctrl.Result{}, r.remove(ctx, pod)
	}
	if !strings.HasPrefix(node.Spec.ProviderID, simv1.ProviderIDPrefix) {
		return ctrl.Result{}, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		// A slow pod takes all of its grace period to stop (the API server
		// set deletionTimestamp to its end); any other stops at once.
		if pod.Labels[simv1.LabelWorkload] == workloadSlow {
			if wait := pod.DeletionTimestamp.Sub(r.now()); wait > 0 {
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
		return ctrl.Result{}, r.remove(ctx, pod)
	}
	if pod.Status.Phase == corev1.PodRunning && podReady(pod) {
		return ctrl.Result{}, nil
	}
	now := metav1.NewTime(r.now())
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	if err := r.client.Status().Update(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reporting pod %s running: %w", req, err)
	}
	return ctrl.Result{}, nil
}

// remove deletes a pod that has stopped, as a kubelet does.
func (r *kubeletReconciler) remove(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("removing stopped pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// disruptionReconciler plays the disruption controller of the workload
// cluster: the status of each PodDisruptionBudget, which the Eviction API
// reads to allow or refuse an eviction.
type disruptionReconciler struct {
	cache  client.Reader
	client client.Client
	now    func() time.Time
}

func (r *disruptionReconciler) setupWithManager(mgr ctrl.Manager, wl cluster.Cluster, concurrency int) error {
	podBudgets := func(ctx context.Context, p *corev1.Pod) []reconcile.Request {
		budgets := &policyv1.PodDisruptionBudgetList{}
		if err := r.cache.List(ctx, budgets, client.InNamespace(p.Namespace)); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, b := range budgets.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
		return out
	}
	return builder.TypedControllerManagedBy[reconcile.Request](mgr).
		Named("simdisruption").
		WatchesRawSource(source.Kind(wl.GetCache(), &policyv1.PodDisruptionBudget{}, &handler.TypedEnqueueRequestForObject[*policyv1.PodDisruptionBudget]{})).
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(podBudgets))).
		WithOptions(controller.TypedOptions[reconcile.Request]{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

func (r *disruptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pdb := &policyv1.PodDisruptionBudget{}
	if err := r.cache.Get(ctx, req.NamespacedName, pdb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pods := &corev1.PodList{}
	if err := r.cache.List(ctx, pods, client.InNamespace(pdb.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	status, requeue := budgetStatus(pdb, pods.Items, r.now())
	if equality.Semantic.DeepEqual(status, pdb.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	pdb = pdb.DeepCopy()
	pdb.Status = status
	if err := r.client.Status().Update(ctx, pdb); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{Requeue: true}, nil // an eviction wrote it meanwhile
		}
		return ctrl.Result{}, fmt.Errorf("updating the status of PodDisruptionBudget %s: %w", req, err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// budgetStatus is a PodDisruptionBudget's status over the pods of its
// namespace, as the disruption controller computes it: the pods it
// selects are the expected ones; those Ready, not deleting and not just
// let go by an eviction are healthy; minAvailable or maxUnavailable (a
// number or a percentage of the expected pods, rounded up) give the
// healthy pods needed, and the rest may be disrupted. It also returns when
// to look again (a disrupted pod's entry expiring), 0 for never.
func budgetStatus(pdb *policyv1.PodDisruptionBudget, pods []corev1.Pod, now time.Time) (policyv1.PodDisruptionBudgetStatus, time.Duration) {
	st := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, Conditions: pdb.Status.Conditions}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.Selector == nil {
		selector = labels.Nothing()
	}
	var requeue time.Duration
	for _, p := range pods {
		if !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		st.ExpectedPods++
		if at, ok := pdb.Status.DisruptedPods[p.Name]; ok && p.DeletionTimestamp.IsZero() {
			if left := at.Add(disruptedPodTimeout).Sub(now); left > 0 {
				if st.DisruptedPods == nil {
					st.DisruptedPods = map[string]metav1.Time{}
				}
				st.DisruptedPods[p.Name] = at
				if requeue == 0 || left < requeue {
					requeue = left
				}
				continue
			}
		}
		if p.DeletionTimestamp.IsZero() && podReady(&p) {
			st.CurrentHealthy++
		}
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		st.DesiredHealthy = scaled(*pdb.Spec.MinAvailable, st.ExpectedPods)
	case pdb.Spec.MaxUnavailable != nil:
		st.DesiredHealthy = max(st.ExpectedPods-scaled(*pdb.Spec.MaxUnavailable, st.ExpectedPods), 0)
	}
	st.DisruptionsAllowed = max(st.CurrentHealthy-st.DesiredHealthy, 0)
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		ObservedGeneration: pdb.Generation}
	if st.DisruptionsAllowed == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	st.Conditions = setCondition(st.Conditions, cond, now)
	return st, requeue
}

// scaled is a number or a percentage of total, rounded up.
func scaled(v intstr.IntOrString, total int32) int32 {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, int(total), true)
	if err != nil {
		return total
	}
	return int32(n)
}

// setCondition sets c in conds, keeping the transition time when the
// status did not change.
func setCondition(conds []metav1.Condition, c metav1.Condition, now time.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds)+1)
	for _, was := range conds {
		if was.Type != c.Type {
			out = append(out, was)
			continue
		}
		if was.Status == c.Status {
			c.LastTransitionTime = was.LastTransitionTime
		}
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	}
	return append(out, c)
}
