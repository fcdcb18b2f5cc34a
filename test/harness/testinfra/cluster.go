package testinfra

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
)

// CreateCluster creates a Cluster API Cluster whose hosted control plane is
// the test API server itself: a TestControlPlane reporting an initialised,
// externally managed control plane, and the <cluster>-kubeconfig Secret
// pointing at cfg. The Cluster's network is 10.128.0.0/14 for pods and
// 172.30.0.0/16 for services.
func CreateCluster(ctx context.Context, c client.Client, cfg *rest.Config, namespace, name string) (*clusterv1.Cluster, error) {
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(GVK(KindControlPlane))
	cp.SetNamespace(namespace)
	cp.SetName(name)
	if err := c.Create(ctx, cp); err != nil {
		return nil, fmt.Errorf("creating TestControlPlane %s/%s: %w", namespace, name, err)
	}
	_ = unstructured.SetNestedField(cp.Object, true, "status", "initialization", "controlPlaneInitialized")
	_ = unstructured.SetNestedField(cp.Object, true, "status", "externalManagedControlPlane")
	if err := c.Status().Update(ctx, cp); err != nil {
		return nil, fmt.Errorf("reporting TestControlPlane %s/%s initialised: %w", namespace, name, err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/14"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"172.30.0.0/16"}},
			},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "api." + name + ".example.test", Port: 6443},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: Group, Kind: KindControlPlane, Name: name,
			},
		},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("creating Cluster %s/%s: %w", namespace, name, err)
	}
	secret := kubeconfig.GenerateSecret(cluster, kubeconfig.FromEnvTestConfig(cfg, cluster))
	if err := c.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating kubeconfig Secret for %s/%s: %w", namespace, name, err)
	}
	return cluster, nil
}

// CreateMachineTemplate creates a TestMachineTemplate.
func CreateMachineTemplate(ctx context.Context, c client.Client, namespace, name string) error {
	t := &unstructured.Unstructured{}
	t.SetGroupVersionKind(GVK(KindMachineTemplate))
	t.SetNamespace(namespace)
	t.SetName(name)
	_ = unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")
	return c.Create(ctx, t)
}
