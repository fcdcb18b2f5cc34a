package stack

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// CreateCluster creates a Cluster API Cluster with its (sim) control plane
// in namespace ns.
func CreateCluster(ctx context.Context, c client.Client, ns, name string) error {
	_, err := simtest.CreateCluster(ctx, c, ns, name)
	return err
}

// CreateTemplate creates a SimMachineTemplate in namespace ns.
func CreateTemplate(ctx context.Context, c client.Client, ns, name string) error {
	return simtest.CreateMachineTemplate(ctx, c, ns, name, simv1.SimMachineSpec{})
}

// TemplateRef references a SimMachineTemplate from a NodePool.
func TemplateRef(name string) nodepoolv1.TemplateReference {
	return nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: name}
}
