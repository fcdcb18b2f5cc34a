package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// SimMachineSpec is a simulated machine: its size, and the knobs that make
// it slow, broken or unhealthy for tests and demos. The knobs can also be
// set per machine with the annotations of conditions.go, on the SimMachine
// or on its Machine.
type SimMachineSpec struct {
	// providerID is sim://<namespace>/<name>, set by the provider once the
	// machine has booted and registered its Node.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// cpus is the CPU capacity the Node reports. Default 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	CPUs int32 `json:"cpus,omitempty"`

	// memory is the memory capacity the Node reports. Default 4Gi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// bootDelay is how long the machine takes from its creation to fetching
	// its payload, like the power-on of a real machine ("30s", "2m"). Unset,
	// the provider's default applies (usually 0).
	// +optional
	BootDelay *metav1.Duration `json:"bootDelay,omitempty"`

	// failBoot makes a machine that has not booted yet fail to boot: while
	// it is set, the machine does not fetch its payload or register a Node,
	// and reports Booted=False with reason BootFailed.
	// +optional
	FailBoot bool `json:"failBoot,omitempty"`

	// unhealthy makes the machine's Node NotReady (Ready=False, reason
	// KubeletNotReady) once it has booted; clearing it makes the Node Ready
	// again.
	// +optional
	Unhealthy bool `json:"unhealthy,omitempty"`

	// updateDelay is how long the machine's node agent takes to apply an
	// in-place update, from reporting Working to fetching the new payload
	// ("5s"). Unset, the provider's default applies (usually 0).
	// +optional
	UpdateDelay *metav1.Duration `json:"updateDelay,omitempty"`

	// failUpdate makes the machine's node agent fail every in-place update
	// while it is set: the Node reports Degraded with this message, and
	// nothing else changes. Clearing it lets the update go on.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	FailUpdate string `json:"failUpdate,omitempty"`

	// workloads are the pods the machine's Node runs once registered, so
	// that drains have something to evict: a comma-separated list of
	// guarded (a ReplicaSet's pod under the PodDisruptionBudget
	// sim-guarded, maxUnavailable 0: its eviction is refused until the
	// budget is changed), bare (a pod no controller owns), slow=<duration>
	// (a ReplicaSet's pod with that termination grace period), local (a
	// ReplicaSet's pod with an emptyDir volume) and daemon (a DaemonSet's
	// pod, which drains skip). Example: "guarded,bare,slow=90s".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Workloads string `json:"workloads,omitempty"`
}

// SimMachineInitializationStatus is what Cluster API reads to know the
// machine is provisioned (the InfraMachine contract).
// +kubebuilder:validation:MinProperties=1
type SimMachineInitializationStatus struct {
	// provisioned is true once the machine has booted its payload and
	// registered its Node.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// SimMachineStatus is what the provider observed of a simulated machine.
// +kubebuilder:validation:MinProperties=1
type SimMachineStatus struct {
	// initialization follows the Cluster API InfraMachine contract.
	// +optional
	Initialization SimMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses of the machine, copied by Cluster API to the Machine.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// nodeName is the Node the machine registered.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`

	// bootedPayload is the full payload hash of the payload the machine
	// booted (the Node's nodepool.dev/booted-payload annotation).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	BootedPayload string `json:"bootedPayload,omitempty"`

	// nodeLabels are the labels the payload the machine runs (the booted
	// one, or the last one its node agent applied in place) set on the
	// Node; the provider restores them if the Node has to be registered again.
	// +optional
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// failAt is when the machine's Node turns NotReady because the
	// payload it runs carries the file /etc/nodepool-sim/fail-after (a
	// duration, counted from when the payload ran): a bad payload, for
	// tests and demos. Unset for a payload without that file.
	// +optional
	FailAt *metav1.Time `json:"failAt,omitempty"`

	// conditions: Ready (what Cluster API mirrors into the Machine's
	// InfrastructureReady), Booted, NodeHealthy and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=simmachines,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-sim"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Booted",type=string,JSONPath=`.status.conditions[?(@.type=="Booted")].reason`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Payload",type=string,JSONPath=`.status.bootedPayload`,priority=1
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SimMachine is a simulated machine: it boots from its Machine's user-data
// by fetching the payload from the payload server, then registers a Node.
type SimMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SimMachineSpec `json:"spec,omitempty"`
	// +optional
	Status SimMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions (Cluster API's conditions.Getter).
func (m *SimMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions (Cluster API's conditions.Setter).
func (m *SimMachine) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// +kubebuilder:object:root=true

// SimMachineList is a list of SimMachines.
type SimMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SimMachine{}, &SimMachineList{})
}
