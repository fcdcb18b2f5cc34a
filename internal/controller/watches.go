package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/secrets"
)

// byPoolLabel maps a MachineSet or Machine to its pool: the pool label is
// on the MachineDeployment's template (Replace) and on the MachineSet's
// (InPlace), so every machine of a pool carries it.
func byPoolLabel(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[nodepoolv1.LabelPool]
	if name == "" || o.GetLabels()[clusterv1.ClusterNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// poolsReferencing maps a ConfigMap or Secret to the pools whose payload
// depends on it: the pools of its namespace that reference it, or every
// pool for the management config.
func (r *Reconciler) poolsReferencing(ctx context.Context, o client.Object) []reconcile.Request {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok && m.Kind == "ConfigMap" {
		o = &corev1.ConfigMap{ObjectMeta: m.ObjectMeta} // ConfigMaps are watched by their metadata
	}
	if _, owned := o.GetLabels()[nodepoolv1.LabelPool]; owned {
		return nil // the pool's own Secrets are watched through Owns
	}
	if s, ok := o.(*corev1.Secret); ok && secrets.IsMirror(s) {
		// A mirror (mirror.go) edited, deleted, or given its first fetch
		// by the payload server: its pool puts it right or records it.
		ns, pool := s.Labels[secrets.LabelMirrorNamespace], s.Labels[secrets.LabelMirrorPool]
		if ns == "" || pool == "" || o.GetNamespace() != r.Settings.MirrorNamespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: pool}}}
	}
	mc := r.Settings.Inputs.ManagementConfigKey()
	if _, isCM := o.(*corev1.ConfigMap); isCM && o.GetNamespace() == mc.Namespace && o.GetName() == mc.Name {
		return r.pools(ctx, "", func(*nodepoolv1.NodePool) bool { return true })
	}
	return r.pools(ctx, o.GetNamespace(), func(p *nodepoolv1.NodePool) bool { return inputs.References(p, o) })
}

func (r *Reconciler) poolsOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pools(ctx, o.GetNamespace(), func(p *nodepoolv1.NodePool) bool { return p.Spec.ClusterName == o.GetName() })
}

func (r *Reconciler) pools(ctx context.Context, namespace string, match func(*nodepoolv1.NodePool) bool) []reconcile.Request {
	list := &nodepoolv1.NodePoolList{}
	// Read-only: no copy of every pool for each event.
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if match(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// watchNodes makes the workload cluster's Nodes wake their pool while one
// of them is being updated in place, so an agent's report is acted on at
// once, and when one turns Ready or stops being Ready: a health gate sees
// a node that is healthy only for a few seconds (its soak starts, then
// fails) without waiting for Cluster API to mirror it on the Machine.
// Watching the same cluster twice is a no-op.
func (r *Reconciler) watchNodes(ctx context.Context, pool *nodepoolv1.NodePool) error {
	if r.controller == nil || r.ClusterCache == nil {
		return nil
	}
	updating := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return nodeWakesPool(e.ObjectOld, e.ObjectNew) },
	}
	return r.ClusterCache.Watch(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName},
		clustercache.NewWatcher(clustercache.WatcherOptions{
			Name:         "nodepool-nodes",
			Watcher:      r.controller,
			Kind:         &corev1.Node{},
			EventHandler: handler.EnqueueRequestsFromMapFunc(r.nodeToPool),
			Predicates:   []predicate.Predicate{updating},
		}))
}

// nodeWakesPool says which Node updates wake the Node's pool: one being
// updated in place, or one whose Ready status changed.
func nodeWakesPool(old, updated client.Object) bool {
	return updated.GetAnnotations()[nodepoolv1.AnnotationUpdatePhase] != "" || readyOf(old) != readyOf(updated)
}

// readyOf is the status of a Node's Ready condition ("" when it has none).
func readyOf(o client.Object) corev1.ConditionStatus {
	n, ok := o.(*corev1.Node)
	if !ok {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// nodeToPool maps a Node to the pool of its Machine (Cluster API
// annotates Nodes with their Machine).
func (r *Reconciler) nodeToPool(ctx context.Context, o client.Object) []reconcile.Request {
	a := o.GetAnnotations()
	ns, name := a[clusterv1.ClusterNamespaceAnnotation], a[clusterv1.MachineAnnotation]
	if ns == "" || name == "" {
		return nil
	}
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		return nil
	}
	return byPoolLabel(ctx, m)
}

// watchTemplates makes an edit of the infrastructure template a pool
// references wake the pool at once (not at the next resync): the kind is
// only known from the pools, so its watch starts with the first pool that
// references it. The pool's own clones are not watched.
func (r *Reconciler) watchTemplates(t inputs.TemplateInput) error {
	if r.controller == nil || r.Cache == nil || t.Kind == "" {
		return nil
	}
	gvk := schema.GroupVersionKind{Group: t.APIGroup, Version: t.Version, Kind: t.Kind}
	if _, seen := r.watchedTemplates.LoadOrStore(gvk, true); seen {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	notClone := predicate.NewTypedPredicateFuncs(func(o *unstructured.Unstructured) bool {
		_, clone := o.GetLabels()[nodepoolv1.LabelPool]
		return !clone
	})
	byRef := handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, o *unstructured.Unstructured) []reconcile.Request {
			return r.pools(ctx, o.GetNamespace(), func(p *nodepoolv1.NodePool) bool {
				ref := p.Spec.InfrastructureTemplateRef
				return ref.Name == o.GetName() && ref.Kind == gvk.Kind && ref.APIGroup == gvk.Group
			})
		})
	err := r.controller.Watch(source.Kind(r.Cache, obj, createdLowPriority(byRef), notClone))
	if err != nil {
		r.watchedTemplates.Delete(gvk)
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	return nil
}

// configMapMetadata is what the controller watches of ConfigMaps: their
// metadata only (their content is read when their version changes, see
// inputReader).
func configMapMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(configMapGVK)
	return m
}

// createdLowPriority queues the pools of a created template behind edits:
// a watch started while the controller runs replays every existing
// template as created, which would otherwise queue every pool of the
// template ahead of the pools edited meanwhile.
func createdLowPriority(h handler.TypedEventHandler[*unstructured.Unstructured, reconcile.Request]) handler.TypedEventHandler[*unstructured.Unstructured, reconcile.Request] {
	return handler.TypedFuncs[*unstructured.Unstructured, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*unstructured.Unstructured], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			e.IsInInitialList = true // low priority, where the queue has priorities
			h.Create(ctx, e, q)
		},
		UpdateFunc:  h.Update,
		DeleteFunc:  h.Delete,
		GenericFunc: h.Generic,
	}
}
