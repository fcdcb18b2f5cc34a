package testinfra

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// owningMachine returns the Machine that owns an infrastructure machine, or
// nil while Cluster API has not set the owner reference yet.
func owningMachine(ctx context.Context, c client.Client, infra *unstructured.Unstructured) (*clusterv1.Machine, error) {
	for _, ref := range infra.GetOwnerReferences() {
		if ref.Kind != "Machine" || ref.APIVersion != clusterv1.GroupVersion.String() {
			continue
		}
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: infra.GetNamespace(), Name: ref.Name}, m); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return m, nil
	}
	return nil, nil
}

// machineToInfra maps a Machine to its infrastructure machine of this
// provider, so bootstrap data arriving on the Machine wakes the reconciler.
func machineToInfra() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		m, ok := o.(*clusterv1.Machine)
		if !ok || m.Spec.InfrastructureRef.APIGroup != Group || m.Spec.InfrastructureRef.Kind != KindMachine {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
	})
}
