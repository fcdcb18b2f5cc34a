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
// readiness, cordon, the controller's phase and the node agent's report.
// A Node being drained is drained a step further here (evictions are
// idempotent and never block), so the engine decides on what the drain
// left: the pods still to evict and why an eviction was refused.
func (r *Reconciler) observeInPlace(ctx context.Context, pool *nodepoolv1.NodePool, w *world, in *rollout.Input) {
	if in.InPlace == nil || !w.nodesRead {
		return
	}
	nodes := map[string]*corev1.Node{}
	for i := range w.nodes {
		nodes[w.nodes[i].Name] = &w.nodes[i]
	}
	byMachine := map[string]string{}
	for _, m := range w.machines {
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
			im.PodsLeft, im.DrainBlocked = r.drainStep(ctx, pool, n.Name)
		}
	}
}

// drainStep evicts the pods of a cordoned Node through the Eviction API, so
// PodDisruptionBudgets are honoured, skipping DaemonSet and mirror pods as
// kubectl drain does. It returns how many pods are left (those just
// evicted included, until they are gone) and why an eviction was refused.
func (r *Reconciler) drainStep(ctx context.Context, pool *nodepoolv1.NodePool, node string) (int, string) {
	log := r.log(pool).WithValues("node", node)
	cluster := client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}
	cfg, err := r.ClusterCache.GetRESTConfig(ctx, cluster)
	if err != nil {
		return -1, "cannot reach the workload cluster to drain: " + err.Error()
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return -1, "cannot reach the workload cluster to drain: " + err.Error()
	}
	h := &drain.Helper{
		Ctx: ctx, Client: cs, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Out: io.Discard, ErrOut: io.Discard,
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		return -1, fmt.Sprintf("cannot list the pods to evict: %v", errs[0])
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
	return len(pods), strings.Join(refused, "; ")
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
