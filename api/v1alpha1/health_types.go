package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FailurePolicy says what the health gate does when a machine on a new
// payload fails its health check.
// +kubebuilder:validation:Enum=Halt;Rollback
type FailurePolicy string

const (
	// FailurePolicyHalt stops replacing machines and says why; the pool
	// waits for the owner's next change. The default.
	FailurePolicyHalt FailurePolicy = "Halt"
	// FailurePolicyRollback returns the pool to the previous revision's
	// payload and replaces the failed machines.
	FailurePolicyRollback FailurePolicy = "Rollback"
)

// HealthGateCondition is the Machine condition type nodepool owns and
// lists as a readiness gate of the pool's machines: Cluster API counts a
// machine available only once it is True, so its rolling update waits for
// it. nodepool sets it True once the machine's node has stayed healthy for
// the soak time.
const HealthGateCondition = "nodepool.dev/Healthy"

// Reasons of the HealthGateCondition on a Machine.
const (
	// GateReasonSoaked: the node stayed healthy for the soak time.
	GateReasonSoaked = "Soaked"
	// GateReasonNotOnTrial: the machine runs a payload no rollout is
	// testing (machines that existed before the rollout, or any machine
	// of a settled pool).
	GateReasonNotOnTrial = "NotOnTrial"
	// GateReasonWaitingForNode: the machine has no healthy node yet.
	GateReasonWaitingForNode = "WaitingForNode"
	// GateReasonSoaking: the node is healthy and soaks.
	GateReasonSoaking = "Soaking"
	// GateReasonWaitingForCanary: the machine is on the new payload
	// beyond the canary; it is held until every canary machine soaked.
	GateReasonWaitingForCanary = "WaitingForCanary"
	// GateReasonHalted: the rollout is halted (a machine failed); the
	// machine is held until the pool changes or the rollout is resumed.
	GateReasonHalted = "Halted"
	// GateReasonFailed: the machine's node turned unhealthy during its
	// soak. Final.
	GateReasonFailed = "Failed"
	// GateReasonProgressDeadlineExceeded: the machine did not get a
	// healthy node within the progress deadline. Final.
	GateReasonProgressDeadlineExceeded = ReasonProgressDeadlineExceeded
)

// NodeConditionMatch names a node condition type and the status in which
// it makes the node unhealthy.
type NodeConditionMatch struct {
	// type of the node condition, such as KernelDeadlock or
	// example.com/AppHealthy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// status in which the condition is bad: True, False or Unknown.
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status"`
}

// Health gates a pool's rollouts on the health of the machines on the new
// payload. A node is healthy when its Ready condition is True, none of
// unhealthyConditions matches, and every condition of requiredConditions
// is True, for the whole soak time (counted from the last transition of
// any of those conditions).
type Health struct {
	// canary is how many machines of a rollout go first: a number (at
	// least 1) or a percentage of the pool's machines (rounded up, at
	// least one machine). Default 1. The rest of the rollout starts only
	// once every canary machine has soaked for canarySoak.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : (self.matches('^[0-9]+%$') && int(self.substring(0, self.size() - 1)) >= 1 && int(self.substring(0, self.size() - 1)) <= 100)",message="spec.management.health.canary must be a number of at least 1 or a percentage from 1% to 100%, such as 1 or 10%"
	Canary *intstr.IntOrString `json:"canary,omitempty"`

	// canarySoak is how long each canary machine's node must stay healthy
	// before the rollout goes on. Default 5m; at most 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.management.health.canarySoak must be a duration between 0s and 24h, such as 5m"
	CanarySoak *metav1.Duration `json:"canarySoak,omitempty"`

	// soak is how long each later machine's node must stay healthy before
	// Cluster API counts it available (and replaces the next). Default 0s;
	// at most 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.management.health.soak must be a duration between 0s and 24h, such as 1m"
	Soak *metav1.Duration `json:"soak,omitempty"`

	// progressDeadline is how long a new machine may take, from its
	// creation, to get a healthy node. Past it the rollout fails. Default
	// 15m; between 1s and 24h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="spec.management.health.progressDeadline must be a duration between 1s and 24h, such as 15m"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// failurePolicy is Halt (default: stop replacing machines and report)
	// or Rollback (return to the previous revision's payload).
	// +optional
	// +kubebuilder:default=Halt
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// unhealthyConditions are node conditions that make a node unhealthy
	// when they have the given status, such as {type: KernelDeadlock,
	// status: "True"} from node-problem-detector.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	UnhealthyConditions []NodeConditionMatch `json:"unhealthyConditions,omitempty"`

	// requiredConditions are node condition types that must be True for a
	// node to be healthy, such as one an application health DaemonSet sets.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=316
	RequiredConditions []string `json:"requiredConditions,omitempty"`
}
