package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Node labels and taints of spec.nodeLabels and spec.taints are written on
// the Nodes directly, in place: they are never payload inputs, so changing
// them never rolls a machine. These annotations on a Node record what
// nodepool set, so a label or taint removed from the spec is removed too.
const (
	annotationManagedLabels = "nodepool.dev/managed-labels"
	annotationManagedTaints = "nodepool.dev/managed-taints"
)

// observeNodes reads the pool's Nodes in the workload cluster through
// Cluster API's ClusterCache: the Nodes the pool's Machines reference.
func (r *Reconciler) observeNodes(ctx context.Context, pool *nodepoolv1.NodePool, w *world, in *rollout.Input) error {
	if r.ClusterCache == nil {
		return fmt.Errorf("no ClusterCache")
	}
	key := client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}
	var c client.Reader
	var err error
	if in.InPlace != nil {
		// An InPlace pool's Nodes are read live: the engine counts the
		// Nodes in an update phase against maxUnavailable on them, and a
		// cache that lags (a controller just restarted, a reconcile that
		// raced an earlier one) must never let more updates start.
		c, err = r.ClusterCache.GetUncachedClient(ctx, key)
	} else {
		c, err = r.ClusterCache.GetClient(ctx, key)
	}
	if err != nil {
		return err
	}
	for _, m := range w.Machines {
		if !m.Status.NodeRef.IsDefined() {
			continue
		}
		node := corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &node); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return err
		}
		w.nodes = append(w.nodes, node)
		in.Nodes = append(in.Nodes, rollout.Node{Name: node.Name, Payload: node.Labels[nodepoolv1.LabelPayload], Ready: nodeReady(&node)})
	}
	w.nodesRead = true
	return nil
}

// reservedLabel reports whether a node label key is nodepool's own.
func reservedLabel(k string) bool {
	return strings.HasPrefix(k, "nodepool.dev/")
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// syncNodes propagates spec.nodeLabels and spec.taints to the pool's Nodes.
func (r *Reconciler) syncNodes(ctx context.Context, pool *nodepoolv1.NodePool, w *world) error {
	if !w.nodesRead || len(w.nodes) == 0 {
		return nil
	}
	c, err := r.ClusterCache.GetClient(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName})
	if err != nil {
		return err
	}
	for i := range w.nodes {
		node := &w.nodes[i]
		updated := node.DeepCopy()
		if !applyLabelsAndTaints(updated, pool) {
			continue
		}
		// Taints are a list: a merge patch replaces it whole, so it is
		// written only over the version read, never over another
		// writer's newer taints (a conflict retries on the next reconcile).
		if err := c.Patch(ctx, updated, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("propagating labels and taints to Node %s: %w", node.Name, err)
		}
	}
	return nil
}

// applyLabelsAndTaints makes a Node carry the pool's labels and taints and
// drops those nodepool set before that are gone from the spec. It reports
// whether it changed anything.
func applyLabelsAndTaints(n *corev1.Node, pool *nodepoolv1.NodePool) bool {
	before := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for _, k := range splitList(n.Annotations[annotationManagedLabels]) {
		if _, keep := pool.Spec.NodeLabels[k]; !keep && !reservedLabel(k) {
			delete(n.Labels, k)
		}
	}
	var keys []string
	for k, v := range pool.Spec.NodeLabels {
		if reservedLabel(k) {
			continue // refused by the API; never written over the payload's own
		}
		n.Labels[k] = string(v)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	setOrDelete(n.Annotations, annotationManagedLabels, strings.Join(keys, ","))

	want := map[string]corev1.Taint{}
	var tkeys []string
	for _, t := range pool.Spec.Taints {
		k := t.Key + ":" + string(t.Effect)
		want[k] = corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
		tkeys = append(tkeys, k)
	}
	managed := splitList(n.Annotations[annotationManagedTaints])
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		k := t.Key + ":" + string(t.Effect)
		if _, ours := want[k]; ours {
			continue
		}
		if slices.Contains(managed, k) {
			continue // set by nodepool, gone from the spec
		}
		taints = append(taints, t)
	}
	sort.Strings(tkeys)
	for _, k := range tkeys {
		taints = append(taints, want[k])
	}
	n.Spec.Taints = taints
	setOrDelete(n.Annotations, annotationManagedTaints, strings.Join(tkeys, ","))
	return !equalLabelsTaints(before, n)
}

func equalLabelsTaints(a, b *corev1.Node) bool {
	if len(a.Spec.Taints) != len(b.Spec.Taints) {
		return false
	}
	for i := range a.Spec.Taints {
		if a.Spec.Taints[i] != b.Spec.Taints[i] {
			return false
		}
	}
	return mapsEqual(a.Labels, b.Labels) && mapsEqual(a.Annotations, b.Annotations)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
