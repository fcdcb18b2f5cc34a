package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// observeInPlace adds to an InPlace pool's machines what their Nodes say:
// readiness, cordon, the controller's phase and the node agent's report,
// and, for a Node being drained, the pods still to evict and why the last
// eviction was refused. Evicting is a step of the plan (StepDrain), applied
// by drainStep.
func (r *Reconciler) observeInPlace(ctx context.Context, pool *nodepoolv1.NodePool, w *world, in *rollout.Input) {
	if in.InPlace == nil || !w.nodesRead {
		return
	}
	nodes := map[string]*corev1.Node{}
	for i := range w.nodes {
		nodes[w.nodes[i].Name] = &w.nodes[i]
	}
	byMachine := map[string]string{}
	for _, m := range w.Machines {
		if m.Status.NodeRef.IsDefined() {
			byMachine[m.Name] = m.Status.NodeRef.Name
		}
	}
	for i := range in.InPlace.Machines {
		im := &in.InPlace.Machines[i]
		n, ok := nodes[byMachine[im.Machine]]
		if !ok {
			continue
		}
		a := n.Annotations
		im.Node, im.Unschedulable = n.Name, n.Spec.Unschedulable
		im.Phase, im.WasUnschedulable = a[nodepoolv1.AnnotationUpdatePhase], a[nodepoolv1.AnnotationWasUnschedulable] == "true"
		if t, err := time.Parse(time.RFC3339, a[nodepoolv1.AnnotationUpdateStartedAt]); err == nil {
			im.StartedAt = t
		}
		if t, err := time.Parse(time.RFC3339, a[nodepoolv1.AnnotationUpdateRequestedAt]); err == nil {
			im.RequestedAt = t
		}
		im.Desired, im.Current = a[nodepoolv1.AnnotationDesiredPayload], a[nodepoolv1.AnnotationNodeCurrentPayload]
		im.State, im.Message = a[nodepoolv1.AnnotationUpdateState], a[nodepoolv1.AnnotationUpdateMessage]
		if im.Phase == nodepoolv1.UpdatePhaseDraining {
			im.PodsLeft, im.DrainBlocked = r.podsLeft(ctx, pool, n.Name), a[nodepoolv1.AnnotationDrainBlocked]
		}
	}
}

// drainHelper is kubectl's drain helper for the pool's workload cluster:
// evictions through the Eviction API, so PodDisruptionBudgets are honoured,
// skipping DaemonSet and mirror pods as kubectl drain does.
func (r *Reconciler) drainHelper(ctx context.Context, pool *nodepoolv1.NodePool) (*drain.Helper, error) {
	cluster := client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}
	cfg, err := r.ClusterCache.GetRESTConfig(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the workload cluster to drain: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the workload cluster to drain: %w", err)
	}
	return &drain.Helper{
		Ctx: ctx, Client: cs, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Out: io.Discard, ErrOut: io.Discard,
	}, nil
}

// podsLeft counts the pods a drain of node still has to evict (those being
// evicted included, until they are gone); -1 when they cannot be listed.
func (r *Reconciler) podsLeft(ctx context.Context, pool *nodepoolv1.NodePool, node string) int {
	h, err := r.drainHelper(ctx, pool)
	if err != nil {
		return -1
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return -1
	}
	return len(list.Pods())
}

// drainStep evicts the pods still on a cordoned Node (evictions are
// idempotent and never block) and returns why an eviction was refused,
// "" when none was.
func (r *Reconciler) drainStep(ctx context.Context, pool *nodepoolv1.NodePool, node string) string {
	log := r.log(pool).WithValues("node", node)
	h, err := r.drainHelper(ctx, pool)
	if err != nil {
		return err.Error()
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return fmt.Sprintf("cannot list the pods to evict: %v", errs[0])
	}
	pods := list.Pods()
	var refused []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue // evicted, terminating
		}
		err := h.EvictPod(pod, policyv1.SchemeGroupVersion)
		switch {
		case err == nil:
			log.V(1).Info("evicted pod", "pod", pod.Namespace+"/"+pod.Name)
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused = append(refused, fmt.Sprintf("eviction of pod %s/%s refused: %s", pod.Namespace, pod.Name, disruptionMessage(err)))
		default:
			refused = append(refused, fmt.Sprintf("eviction of pod %s/%s failed: %v", pod.Namespace, pod.Name, err))
		}
	}
	return strings.Join(refused, "; ")
}

// disruptionMessage is the API server's reason for refusing an eviction
// (it names the PodDisruptionBudget).
func disruptionMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Type == policyv1.DisruptionBudgetCause {
					return c.Message
				}
			}
		}
	}
	return err.Error()
}
