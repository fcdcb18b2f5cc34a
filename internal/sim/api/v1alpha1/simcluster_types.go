package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SimClusterSpec is the simulated infrastructure of a Cluster: there is
// nothing to provision.
type SimClusterSpec struct{}

// SimClusterInitializationStatus follows the Cluster API infrastructure
// cluster contract.
// +kubebuilder:validation:MinProperties=1
type SimClusterInitializationStatus struct {
	// provisioned is true as soon as the provider has seen the SimCluster.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// SimClusterStatus is what the provider reports to Cluster API.
// +kubebuilder:validation:MinProperties=1
type SimClusterStatus struct {
	// initialization follows the Cluster API infrastructure cluster contract.
	// +optional
	Initialization SimClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simclusters,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-sim"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SimCluster is the infrastructure of a Cluster whose machines are
// simulated (its spec.infrastructureRef). Cluster API reports a Cluster
// without one as InfrastructureReady Unknown, and checks such as
// MachineHealthChecks never evaluate its machines.
type SimCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SimClusterSpec `json:"spec,omitempty"`
	// +optional
	Status SimClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions (Cluster API's conditions.Getter).
func (c *SimCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions (Cluster API's conditions.Setter).
func (c *SimCluster) SetConditions(cs []metav1.Condition) { c.Status.Conditions = cs }

// +kubebuilder:object:root=true

// SimClusterList is a list of SimClusters.
type SimClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SimCluster{}, &SimClusterList{})
}
