package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimControlPlaneSpec is a hosted control plane that already runs: the API
// server the provider itself talks to.
type SimControlPlaneSpec struct {
	// controlPlaneEndpoint is copied by Cluster API to a Cluster that has
	// none. It is what the nodes' payload names as the API server; the
	// <cluster>-kubeconfig Secret points at the provider's API server
	// whatever it says.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// SimControlPlaneInitializationStatus follows the Cluster API control-plane
// contract.
// +kubebuilder:validation:MinProperties=1
type SimControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once the <cluster>-kubeconfig Secret
	// exists: from then on Cluster API watches the cluster's Nodes.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// SimControlPlaneStatus is what the provider reports to Cluster API.
// +kubebuilder:validation:MinProperties=1
type SimControlPlaneStatus struct {
	// initialization follows the Cluster API control-plane contract.
	// +optional
	Initialization SimControlPlaneInitializationStatus `json:"initialization,omitempty,omitzero"`

	// externalManagedControlPlane is always true: the control plane has no
	// Machines, so Cluster API deletes Nodes of deleted Machines without
	// looking for control-plane members.
	// +optional
	ExternalManagedControlPlane *bool `json:"externalManagedControlPlane,omitempty"`

	// conditions: Available (the kubeconfig Secret exists) and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simcontrolplanes,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=control-plane-sim"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Initialized",type=boolean,JSONPath=`.status.initialization.controlPlaneInitialized`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SimControlPlane is the hosted control plane of a Cluster whose machines
// are simulated. It owns the <cluster>-kubeconfig Secret, which points at
// the API server the provider runs against.
type SimControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SimControlPlaneSpec `json:"spec,omitempty"`
	// +optional
	Status SimControlPlaneStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions (Cluster API's conditions.Getter).
func (cp *SimControlPlane) GetConditions() []metav1.Condition { return cp.Status.Conditions }

// SetConditions sets the conditions (Cluster API's conditions.Setter).
func (cp *SimControlPlane) SetConditions(c []metav1.Condition) { cp.Status.Conditions = c }

// +kubebuilder:object:root=true

// SimControlPlaneList is a list of SimControlPlanes.
type SimControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimControlPlane `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SimControlPlane{}, &SimControlPlaneList{})
}
