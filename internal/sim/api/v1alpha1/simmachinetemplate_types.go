package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimMachineTemplateSpec holds the template Cluster API clones SimMachines
// from.
type SimMachineTemplateSpec struct {
	// template is cloned into each SimMachine.
	// +required
	Template SimMachineTemplateResource `json:"template"`
}

// SimMachineTemplateResource is a SimMachine to clone.
type SimMachineTemplateResource struct {
	// metadata is added to each cloned SimMachine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of each cloned SimMachine.
	// +required
	Spec SimMachineSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=simmachinetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-sim"
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.template.spec.cpus`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.template.spec.memory`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SimMachineTemplate is the infrastructure template of a MachineDeployment
// or MachineSet whose machines are simulated.
type SimMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SimMachineTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// SimMachineTemplateList is a list of SimMachineTemplates.
type SimMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SimMachineTemplate{}, &SimMachineTemplateList{})
}
