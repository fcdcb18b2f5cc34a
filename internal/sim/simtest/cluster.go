package simtest

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// Version is the Kubernetes version of the machines tests make.
const Version = "v1.36.3"

// CreateCluster creates a Cluster whose hosted control plane is a
// SimControlPlane of the same name, and whose infrastructure is a
// SimCluster of the same name: the sim provider writes its
// <cluster>-kubeconfig Secret and reports both ready (Cluster API's
// MachineHealthChecks evaluate machines only once the infrastructure is). The network is
// 10.128.0.0/14 for pods and 172.30.0.0/16 for services.
func CreateCluster(ctx context.Context, c client.Client, namespace, name string) (*clusterv1.Cluster, error) {
	cp := &simv1.SimControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Create(ctx, cp); err != nil {
		return nil, fmt.Errorf("creating SimControlPlane %s/%s: %w", namespace, name, err)
	}
	infra := &simv1.SimCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	// It has no state: one left by an interrupted run is as good as new.
	if err := c.Create(ctx, infra); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating SimCluster %s/%s: %w", namespace, name, err)
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
				APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimControlPlane, Name: name,
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimCluster, Name: name,
			},
		},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("creating Cluster %s/%s: %w", namespace, name, err)
	}
	return cluster, nil
}

// CreateMachineTemplate creates a SimMachineTemplate whose machines have spec.
func CreateMachineTemplate(ctx context.Context, c client.Client, namespace, name string, spec simv1.SimMachineSpec) error {
	t := &simv1.SimMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       simv1.SimMachineTemplateSpec{Template: simv1.SimMachineTemplateResource{Spec: spec}},
	}
	if err := c.Create(ctx, t); err != nil {
		return fmt.Errorf("creating SimMachineTemplate %s/%s: %w", namespace, name, err)
	}
	return nil
}

// MachineDeployment returns a MachineDeployment of replicas machines of
// Version over the SimMachineTemplate template, booting from the bootstrap
// data Secret dataSecretName, with every field the Cluster API controllers
// need when no webhook defaults them.
func MachineDeployment(namespace, cluster, name, template, dataSecretName string, replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{
		clusterv1.ClusterNameLabel:           cluster,
		clusterv1.MachineDeploymentNameLabel: name,
	}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cluster,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: cluster,
					Version:     Version,
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(dataSecretName)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: template,
					},
				},
			},
		},
	}
}
