package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// byDeploymentLabel maps a MachineSet or Machine to the pool whose
// MachineDeployment it belongs to (the pool and the MachineDeployment share
// their name).
func byDeploymentLabel(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.MachineDeploymentNameLabel]
	if name == "" || o.GetLabels()[nodepoolv1.LabelPool] != name {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// poolsReferencing maps a ConfigMap or Secret to the pools whose payload
// depends on it: the pools of its namespace that reference it, or every
// pool for the management config.
func (r *Reconciler) poolsReferencing(ctx context.Context, o client.Object) []reconcile.Request {
	if _, owned := o.GetLabels()[nodepoolv1.LabelPool]; owned {
		return nil // the pool's own Secrets are watched through Owns
	}
	mc := r.Settings.Inputs.ManagementConfig
	if mc.Name == "" {
		mc = inputs.DefaultManagementConfig
	}
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
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
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
