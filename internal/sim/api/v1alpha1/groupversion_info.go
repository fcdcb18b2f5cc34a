// Package v1alpha1 is the API of the sim provider (infrastructure.sim.nodepool.dev):
// SimMachine, SimMachineTemplate and SimControlPlane on the Cluster API v1beta2
// contracts, with the knobs, conditions and reasons of a simulated machine.
// +kubebuilder:object:generate=true
// +groupName=infrastructure.sim.nodepool.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the sim provider.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.sim.nodepool.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kinds of the group.
const (
	KindSimMachine         = "SimMachine"
	KindSimMachineTemplate = "SimMachineTemplate"
	KindSimControlPlane    = "SimControlPlane"
	KindSimCluster         = "SimCluster"
)
