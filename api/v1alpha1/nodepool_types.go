package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UpgradeType says how a pool's machines move to a new payload.
// +kubebuilder:validation:Enum=Replace;InPlace
type UpgradeType string

const (
	// UpgradeTypeReplace replaces machines through a Cluster API MachineDeployment.
	UpgradeTypeReplace UpgradeType = "Replace"
	// UpgradeTypeInPlace updates the machines of a Cluster API MachineSet in place.
	UpgradeTypeInPlace UpgradeType = "InPlace"
)

// ReplaceStrategyType is the strategy of a Replace pool.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type ReplaceStrategyType string

const (
	// ReplaceStrategyRollingUpdate replaces machines a few at a time.
	ReplaceStrategyRollingUpdate ReplaceStrategyType = "RollingUpdate"
	// ReplaceStrategyOnDelete replaces a machine only when someone deletes it.
	ReplaceStrategyOnDelete ReplaceStrategyType = "OnDelete"
)

// ManagementUpdatePolicy says what new nodes boot while management drift is pending.
// +kubebuilder:validation:Enum=OnNextRollout;NewNodes;Rollout
type ManagementUpdatePolicy string

const (
	// ManagementUpdatesOnNextRollout gives new nodes the pinned components of the
	// running nodes plus the current fresh ones; the rest of the drift applies at
	// the next owner-driven rollout. The default.
	ManagementUpdatesOnNextRollout ManagementUpdatePolicy = "OnNextRollout"
	// ManagementUpdatesNewNodes gives new nodes the latest payload; existing
	// nodes stay as they are.
	ManagementUpdatesNewNodes ManagementUpdatePolicy = "NewNodes"
	// ManagementUpdatesRollout rolls management drift like owner intent.
	ManagementUpdatesRollout ManagementUpdatePolicy = "Rollout"
)

// NodePoolSpec is the owner's intent for a pool of worker machines.
// +kubebuilder:validation:XValidation:rule="!(has(self.nodeDrainTimeout) && has(self.management) && has(self.management.drain))",message="spec.nodeDrainTimeout and spec.management.drain are exclusive: spec.nodeDrainTimeout is spec.management.drain with onTimeout Force and that timeout; set one of them"
// +kubebuilder:validation:XValidation:rule="!(has(self.replicas) && has(self.autoScaling))",message="spec.replicas and spec.autoScaling are mutually exclusive: set replicas for a fixed size or autoScaling for a range, not both (an autoscaled pool cannot be scaled by hand, kubectl scale included: the cluster autoscaler sizes it within spec.autoScaling; change min and max, or remove spec.autoScaling and set spec.replicas)"
// +kubebuilder:validation:XValidation:rule="has(self.replicas) || has(self.autoScaling)",message="set spec.replicas (a fixed size) or spec.autoScaling (min and max)"
type NodePoolSpec struct {
	// clusterName is the Cluster API Cluster, in the same namespace, that the
	// pool's machines join. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterName is immutable: create a new NodePool to run workers in another cluster"
	ClusterName string `json:"clusterName"`

	// replicas is the fixed number of machines (exclusive with autoScaling).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// autoScaling lets the cluster autoscaler size the pool between min and max.
	// Exclusive with replicas.
	// +optional
	AutoScaling *AutoScaling `json:"autoScaling,omitempty"`

	// release is the Kubernetes version and optional OS image the nodes run.
	// +required
	Release Release `json:"release"`

	// config lists ConfigMaps in the pool's namespace whose key "config" holds
	// one or more YAML or JSON documents, each an Ignition config fragment
	// (spec 3.x) or a MachineConfig (machineconfiguration.openshift.io/v1).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Config []LocalObjectReference `json:"config,omitempty"`

	// pullSecretRef names a Secret of type kubernetes.io/dockerconfigjson in the
	// pool's namespace. Rotating its content does not roll nodes; pointing at
	// another Secret does.
	// +optional
	PullSecretRef *LocalObjectReference `json:"pullSecretRef,omitempty"`

	// additionalTrustBundleRef names a ConfigMap in the pool's namespace whose
	// key "ca-bundle.crt" holds PEM certificates the nodes trust.
	// +optional
	AdditionalTrustBundleRef *LocalObjectReference `json:"additionalTrustBundleRef,omitempty"`

	// proxy is the HTTP proxy the nodes use. The platform adds NoProxy entries
	// for the cluster networks and the metadata address on its own.
	// +optional
	Proxy *Proxy `json:"proxy,omitempty"`

	// registryMirrors redirect image pulls from a source to mirrors.
	// +optional
	// +listType=map
	// +listMapKey=source
	// +kubebuilder:validation:MaxItems=50
	RegistryMirrors []RegistryMirror `json:"registryMirrors,omitempty"`

	// infrastructureTemplateRef is the infrastructure machine template the
	// pool's machines are made from. The controller clones it under a name
	// derived from its content, so editing the template rolls the pool.
	// +required
	InfrastructureTemplateRef TemplateReference `json:"infrastructureTemplateRef"`

	// nodeLabels are set on every node of the pool. Changing them never
	// replaces a machine. Keys under nodepool.dev/ are reserved: the
	// controller and the payload set them.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('nodepool.dev/'))",message="spec.nodeLabels: keys under nodepool.dev/ are reserved (nodepool sets nodepool.dev/pool and nodepool.dev/payload on every node itself); use another prefix such as example.com/"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="spec.nodeLabels: every key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit (for example 'example.com/role')"
	NodeLabels map[string]LabelValue `json:"nodeLabels,omitempty"`

	// taints are set on every node of the pool. Changing them never replaces
	// a machine.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Taints []Taint `json:"taints,omitempty"`

	// nodeDrainTimeout bounds how long a machine's node is drained before it
	// is deleted anyway. Unset or 0s means no limit; at most 8760h (a
	// year). Changing it never replaces a machine.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('8760h')",message="spec.nodeDrainTimeout must be a duration between 0s and 8760h (one year), such as 10m; 0s means no limit"
	NodeDrainTimeout *metav1.Duration `json:"nodeDrainTimeout,omitempty"`

	// nodeVolumeDetachTimeout bounds how long, after its node is drained,
	// a machine waits for the node's volumes to detach before it is deleted
	// anyway. Unset or 0s means no limit; at most 8760h (a year). Changing
	// it never replaces a machine.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('8760h')",message="spec.nodeVolumeDetachTimeout must be a duration between 0s and 8760h (one year), such as 10m; 0s means no limit"
	NodeVolumeDetachTimeout *metav1.Duration `json:"nodeVolumeDetachTimeout,omitempty"`

	// management says how and when the pool's machines are updated.
	// +optional
	// +kubebuilder:default={}
	Management Management `json:"management,omitempty"`
}

// LabelValue is the value of a node label.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="!format.labelValue().validate(self).hasValue()",message="spec.nodeLabels: every value must be empty or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type LabelValue string

// AutoScaling is the range the cluster autoscaler may size the pool in.
// +kubebuilder:validation:XValidation:rule="self.min <= self.max",message="spec.autoScaling.min must be less than or equal to spec.autoScaling.max"
type AutoScaling struct {
	// min is the smallest number of machines.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Min int32 `json:"min"`
	// max is the largest number of machines.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Max int32 `json:"max"`
}

// Release is what the nodes run.
type Release struct {
	// version is the Kubernetes version of the kubelet, such as v1.36.3.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^v(0|[1-9][0-9]*)\\\\.(0|[1-9][0-9]*)\\\\.(0|[1-9][0-9]*)$')",messageExpression="'spec.release.version must look like v1.2.3 (a \"v\", then major.minor.patch), got \"' + self + '\"'"
	Version string `json:"version"`
	// image is an optional OS or release image reference.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`
}

// LocalObjectReference names an object in the pool's namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Proxy is the owner's HTTP proxy settings for the nodes.
type Proxy struct {
	// httpProxy is the proxy for plain HTTP requests.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	HTTPProxy string `json:"httpProxy,omitempty"`
	// httpsProxy is the proxy for HTTPS requests.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	// noProxy lists hosts, domains and CIDRs reached without the proxy.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	NoProxy []string `json:"noProxy,omitempty"`
}

// RegistryMirror redirects pulls of images under source to mirrors.
type RegistryMirror struct {
	// source is a registry or repository prefix, such as quay.io/org.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Source string `json:"source"`
	// mirrors are tried in order before the source.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=512
	Mirrors []string `json:"mirrors"`
}

// TemplateReference points at an infrastructure machine template in the
// pool's namespace.
type TemplateReference struct {
	// apiGroup of the template, such as infrastructure.sim.nodepool.dev.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`
	// kind of the template; by the Cluster API contract it ends in "Template".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.endsWith('Template')",message="spec.infrastructureTemplateRef.kind must be an infrastructure machine template kind, ending in 'Template'"
	Kind string `json:"kind"`
	// name of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TaintEffect is the effect of a taint.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

// Taint is set on every node of the pool.
type Taint struct {
	// key is a qualified name, such as example.com/dedicated.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="spec.taints[].key must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Key string `json:"key"`
	// value is at most 63 characters of letters, digits, '-', '_' or '.'.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.labelValue().validate(self).hasValue()",message="spec.taints[].value must be empty or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Value string `json:"value,omitempty"`
	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	Effect TaintEffect `json:"effect"`
}

// Management says how and when the pool's machines are updated.
type Management struct {
	// upgradeType is Replace (new machines through a MachineDeployment) or
	// InPlace (machines of a MachineSet updated where they run). It cannot be
	// changed.
	// +optional
	// +kubebuilder:default=Replace
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.management.upgradeType is immutable: create a new NodePool to change how machines are updated"
	UpgradeType UpgradeType `json:"upgradeType,omitempty"`

	// replace configures Replace pools.
	// +optional
	// +kubebuilder:default={}
	Replace ReplaceStrategy `json:"replace,omitempty"`

	// inPlace configures InPlace pools.
	// +optional
	// +kubebuilder:default={}
	InPlace InPlaceStrategy `json:"inPlace,omitempty"`

	// rolloutAfter forces a rollout: at or after this time every machine
	// created before it is replaced (or updated, for InPlace pools), and
	// pending management drift is applied. Before it nothing happens.
	// +optional
	RolloutAfter *metav1.Time `json:"rolloutAfter,omitempty"`

	// pausedUntil is "true" (paused until set otherwise), "false", or an
	// RFC3339 time until which no rollout starts. Scaling still works. A
	// value the controller cannot read as a time holds the pool as paused.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == 'true' || self == 'false' || (self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$') && !format.datetime().validate(self).hasValue())",messageExpression="'spec.management.pausedUntil must be \"true\", \"false\" or an RFC3339 time such as 2026-12-01T02:00:00Z, got \"' + self + '\"'"
	PausedUntil string `json:"pausedUntil,omitempty"`

	// managementUpdates says what new nodes boot while platform (management)
	// changes are pending: OnNextRollout (default), NewNodes or Rollout.
	// +optional
	// +kubebuilder:default=OnNextRollout
	ManagementUpdates ManagementUpdatePolicy `json:"managementUpdates,omitempty"`

	// revisionHistoryLimit is how many finished rollout records
	// (ControllerRevisions) the pool keeps besides a rollout in progress;
	// the oldest beyond it are deleted. 0 keeps only a rollout in progress
	// (rollout undo then has nothing to return to). At most 100:
	// status.revisions lists every record kept. Default 10, like a
	// Deployment's.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// autoRepair, when set, makes the controller create and own a Cluster
	// API MachineHealthCheck for the pool: a machine whose node does not
	// start, or whose node is not Ready for too long, is deleted and
	// replaced. Setting, changing or removing it never replaces a machine
	// by itself; repairs are not rollouts. `autoRepair: {}` uses the
	// defaults. The health check is paused while pausedUntil holds.
	// +optional
	AutoRepair *AutoRepair `json:"autoRepair,omitempty"`

	// maintenance says when rollouts may start: recurring windows,
	// exclusions, which of the owner's rollouts the windows hold, and how
	// long platform drift may wait (maintenance_types.go).
	// +optional
	Maintenance *Maintenance `json:"maintenance,omitempty"`
	// health gates rollouts on the health of the machines on the new
	// payload: a canary, soak times, a progress deadline and what to do
	// on a failure. Unset: rollouts are not gated. Setting or changing it
	// never replaces a machine.
	// +optional
	Health *Health `json:"health,omitempty"`

	// drain says what happens to a node whose drain does not finish: its
	// pods cannot be evicted (a PodDisruptionBudget allows no disruption)
	// or take long to stop. Unset: spec.nodeDrainTimeout applies (Force
	// after it), or the drain waits for ever. Exclusive with
	// spec.nodeDrainTimeout. Setting or changing it never replaces a
	// machine.
	// +optional
	Drain *Drain `json:"drain,omitempty"`
}

// DrainTimeoutPolicy is what happens when a node's drain outlasts
// spec.management.drain.timeout.
// +kubebuilder:validation:Enum=Wait;Force;Halt
type DrainTimeoutPolicy string

const (
	// DrainWait keeps draining for ever; after the timeout the drain is
	// reported blocked (event DrainBlocked), naming the pods that hold it.
	DrainWait DrainTimeoutPolicy = "Wait"
	// DrainForce proceeds after the timeout: the remaining pods are left
	// to go with the node (Cluster API's nodeDrainTimeout; InPlace: the
	// node is updated anyway).
	DrainForce DrainTimeoutPolicy = "Force"
	// DrainHalt halts the rollout after the timeout, as a failed health
	// gate does: the node and its pods are kept, no further machine is
	// replaced or updated, and the pods that blocked are named, until the
	// pool changes or the rollout is resumed.
	DrainHalt DrainTimeoutPolicy = "Halt"
)

// Bounds of spec.management.drain.timeout.
const (
	MinDrainTimeout = 30 * time.Second
	MaxDrainTimeout = 168 * time.Hour
)

// Drain is the pool's drain policy.
// +kubebuilder:validation:XValidation:rule="!has(self.onTimeout) || self.onTimeout == 'Wait' || has(self.timeout)",message="spec.management.drain.timeout is required with onTimeout Force or Halt: how long a node may drain before it is forced or the rollout halts, between 30s and 168h, such as 30m"
type Drain struct {
	// onTimeout is Wait (default), Force or Halt.
	// +optional
	// +kubebuilder:default=Wait
	OnTimeout DrainTimeoutPolicy `json:"onTimeout,omitempty"`

	// timeout is how long a node may drain before onTimeout applies
	// (with Wait: before the drain is reported blocked; default 10m).
	// Between 30s and 168h (a week).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('168h')",message="spec.management.drain.timeout must be a duration between 30s and 168h (a week), such as 30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// AutoRepair says when a machine of the pool is unhealthy and how many
// may be repaired at once.
type AutoRepair struct {
	// nodeStartupTimeout is how long a new machine may take to get a Node
	// before it is replaced. Default 20m; 0s turns the check off.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('8760h')",message="spec.management.autoRepair.nodeStartupTimeout must be a duration between 0s and 8760h (one year), such as 20m; 0s turns the check off"
	NodeStartupTimeout *metav1.Duration `json:"nodeStartupTimeout,omitempty"`

	// unhealthyTimeout is how long a node's Ready condition may be False or
	// Unknown before its machine is replaced. Default 8m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="spec.management.autoRepair.unhealthyTimeout must be a duration between 1s and 8760h (one year), such as 8m"
	UnhealthyTimeout *metav1.Duration `json:"unhealthyTimeout,omitempty"`

	// maxUnhealthy guards against repairing a pool that is broken as a
	// whole: while more machines than this are unhealthy, none is
	// replaced. A number or a percentage of the pool's machines. Default 2.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : (self.matches('^[0-9]+%$') && int(self.substring(0, self.size() - 1)) <= 100)",message="spec.management.autoRepair.maxUnhealthy must be a non-negative number or a percentage from 0% to 100%, such as 2 or 40%"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`
}

// ReplaceStrategy configures how a Replace pool replaces machines.
type ReplaceStrategy struct {
	// strategy is RollingUpdate (default) or OnDelete.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Strategy ReplaceStrategyType `json:"strategy,omitempty"`
	// rollingUpdate bounds a RollingUpdate.
	// +optional
	// +kubebuilder:default={}
	RollingUpdate RollingUpdate `json:"rollingUpdate,omitempty"`
}

// RollingUpdate bounds how many machines are added and removed at once.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && has(self.maxUnavailable) && string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])",message="spec.management.replace.rollingUpdate: maxSurge and maxUnavailable cannot both be 0, or no machine could ever be replaced; set maxSurge to 1 (the default) or maxUnavailable to 1"
type RollingUpdate struct {
	// maxSurge is how many machines may exist above the desired count during a
	// rollout: a number or a percentage. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.management.replace.rollingUpdate.maxSurge must be a non-negative number or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// maxUnavailable is how many machines may be unavailable during a
	// rollout: a number or a percentage. Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.management.replace.rollingUpdate.maxUnavailable must be a non-negative number or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// InPlaceStrategy configures how an InPlace pool updates machines.
type InPlaceStrategy struct {
	// maxUnavailable is how many nodes may be updating at once: a number or a
	// percentage. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]*%$')",message="spec.management.inPlace.maxUnavailable must be at least 1 or a percentage above 0%, or no node could ever be updated"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// NodePoolStatus is what the controller observed and decided. Only the
// controller writes it, so it is one field to the API server's field
// manager (atomic): a status write records one managedFields entry for the
// whole status, not one per field of every condition, which made up half
// of a settled pool's stored size.
// +structType=atomic
type NodePoolStatus struct {
	// observedGeneration is the generation of the spec last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// replicas is the number of machines.
	// +optional
	Replicas int32 `json:"replicas"`
	// desiredReplicas is the number of machines the pool wants: spec.replicas,
	// or, for an autoscaled pool, the autoscaler's count within
	// spec.autoScaling.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// readyReplicas is the number of machines whose node is ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// updatedReplicas is the number of machines on the current rollout.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// version is the Kubernetes version all nodes run, set when a rollout to
	// it completes.
	// +optional
	Version string `json:"version,omitempty"`
	// updating summarises the rollout in progress for kubectl get: "Config",
	// "Version", "Config,Version" or empty.
	// +optional
	Updating string `json:"updating,omitempty"`
	// selector is the label selector of the pool's Machines, in the string
	// form of kubectl's -l (the scale subresource's selector).
	// +optional
	Selector string `json:"selector,omitempty"`
	// conditions report the pool's state; see the Condition* constants.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// pendingManagementChanges has one row per payload component in which
	// the running nodes differ from what the platform would deliver now.
	// +optional
	// +listType=map
	// +listMapKey=component
	PendingManagementChanges []PendingManagementChange `json:"pendingManagementChanges,omitempty"`
	// revisions are the rollout records (ControllerRevisions named
	// <pool>-r<revision>) the controller wrote, oldest first: a
	// ControllerRevision not listed here is not the pool's record,
	// whatever its owner reference claims, and `kubectl nodepool rollout
	// history` and `undo` leave it out.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Revisions []RevisionReference `json:"revisions,omitempty"`
	// nodes counts nodes by the payload they booted, as the nodes report it.
	// +optional
	// +listType=map
	// +listMapKey=payload
	Nodes []NodePayloadCount `json:"nodes,omitempty"`
	// maintenance is the next maintenance window and drift deadline, set
	// when spec.management.maintenance is.
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`
	// rollout is where the pool's rollout stands: its phase, whether it is
	// settled, what holds it and until when, its steps, what a new machine
	// boots and when this changes by itself.
	// +optional
	Rollout *RolloutStanding `json:"rollout,omitempty"`
	// drains are the pool's nodes being drained now: which node, since
	// when, and what holds it.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=100
	Drains []NodeDrainStatus `json:"drains,omitempty"`
}

// NodeDrainStatus is one node being drained.
type NodeDrainStatus struct {
	// node is the Node drained.
	Node string `json:"node"`
	// machine is its Machine.
	Machine string `json:"machine"`
	// since is when the drain started.
	Since metav1.Time `json:"since"`
	// blocked is true once the drain has lasted longer than
	// spec.management.drain.timeout (10m unless set) and pods are left.
	// +optional
	Blocked bool `json:"blocked,omitempty"`
	// pods are the pods that hold the node, with why (at most 10).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Pods []DrainBlocker `json:"pods,omitempty"`
	// message is what the drain reports, as Cluster API's Machine Deleting
	// condition or the last refused eviction says it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
}

// DrainBlocker is one pod that holds a drain.
type DrainBlocker struct {
	// pod is namespace/name.
	Pod string `json:"pod"`
	// budget is the PodDisruptionBudget that refuses its eviction, when
	// one does.
	// +optional
	Budget string `json:"budget,omitempty"`
	// reason says why it holds the node.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}

// PendingManagementChange is one payload component in which the running
// nodes differ from the latest payload.
type PendingManagementChange struct {
	// component is the name of the payload component, such as apiserver-proxy.
	Component string `json:"component"`
	// since is when the nodes first differed from the platform in this
	// component; further changes of the desired digest keep it.
	// spec.management.maintenance.driftDeadline counts from it.
	Since metav1.Time `json:"since"`
	// desiredSince is when the desired digest was first seen: machines
	// made since boot it under managementUpdates: Rollout, whose rollout
	// replaces every machine made before the newest desiredSince.
	// +optional
	DesiredSince *metav1.Time `json:"desiredSince,omitempty"`
	// current is the digest of the component the nodes run.
	Current string `json:"current"`
	// desired is the digest of the component in the latest payload.
	Desired string `json:"desired"`
}

// RevisionReference names one rollout record of the pool.
type RevisionReference struct {
	// revision is the record's number.
	Revision int64 `json:"revision"`
	// uid is the ControllerRevision's UID, which the API server assigns.
	UID types.UID `json:"uid"`
}

// NodePayloadCount is how many nodes booted one payload.
type NodePayloadCount struct {
	// payload is the payload hash prefix the nodes carry in their label.
	Payload string `json:"payload"`
	// count of nodes.
	Count int32 `json:"count"`
}

// NodePool is a pool of worker machines of a Cluster API cluster whose
// rollouts happen only on the owner's intent.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=np;nps,categories=cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`,priority=1
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Updating",type=string,JSONPath=`.status.updating`
// +kubebuilder:printcolumn:name="Pending-Drift",type=string,JSONPath=`.status.pendingManagementChanges[*].component`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name of a NodePool must be at most 63 characters: it is the value of the nodepool.dev/pool label on every node"
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodePool{}, &NodePoolList{})
}

// RolloutPhase is where a pool's rollout stands, in one word.
// +kubebuilder:validation:Enum=Settled;Scaling;Rolling;Held;Halted;RollingBack;Invalid
type RolloutPhase string

// Rollout phases, in the order the controller weighs them.
const (
	// RolloutPhaseInvalid: the inputs do not render; running machines
	// keep running and a rollout in progress goes on with what it has.
	RolloutPhaseInvalid RolloutPhase = "Invalid"
	// RolloutPhaseHalted: the rollout is stopped — by the health gate
	// (halted, or rolled back), by a failed forced rollout, or by a drain
	// past its timeout under spec.management.drain.onTimeout Halt; nothing
	// further is replaced until a resume or an owner change.
	RolloutPhaseHalted RolloutPhase = "Halted"
	// RolloutPhaseRollingBack: the health gate returns the machines to
	// the previous revision.
	RolloutPhaseRollingBack RolloutPhase = "RollingBack"
	// RolloutPhaseRolling: machines are being replaced (or updated in
	// place), or a rollout starts now.
	RolloutPhaseRolling RolloutPhase = "Rolling"
	// RolloutPhaseHeld: a rollout waits; held says what holds it.
	RolloutPhaseHeld RolloutPhase = "Held"
	// RolloutPhaseScaling: nothing rolls, but not every machine is up to
	// date and ready at the wanted count.
	RolloutPhaseScaling RolloutPhase = "Scaling"
	// RolloutPhaseSettled: every machine runs the current rollout and is
	// ready, and nothing waits.
	RolloutPhaseSettled RolloutPhase = "Settled"
)

// RolloutStanding is where the pool's rollout stands, as the controller
// decided in its last reconcile (status.rollout). Tools read it instead of
// working it out from the other fields.
type RolloutStanding struct {
	// phase is where the rollout stands: Settled, Scaling, Rolling, Held,
	// Halted, RollingBack or Invalid.
	Phase RolloutPhase `json:"phase"`
	// revision names the current rollout: the newest record of the pool's
	// history (status.revisions), the rollout in progress (halted
	// included) or, when none is, the one the machines completed. A
	// rollout that waits has no record until it starts. Unset before the
	// first.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// settled is true when nothing rolls, no halt holds, Cluster API has
	// observed the machines' spec, and every machine is up to date and
	// ready at the wanted count. A held rollout that has not started
	// leaves a pool settled: its machines stand still.
	// +optional
	Settled bool `json:"settled"`
	// message says what the phase does or waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// held is the rollout that waits, if one does.
	// +optional
	Held *RolloutHold `json:"held,omitempty"`
	// steps are the steps of the rollout that rolls or waits, when they
	// can be told (not for an OnDelete pool).
	// +optional
	Steps *RolloutSteps `json:"steps,omitempty"`
	// changing is what the rollout that rolls or waits changes: Config,
	// Version or Forced.
	// +optional
	// +listType=atomic
	Changing []string `json:"changing,omitempty"`
	// boots is the hash of the payload a new or replacement machine boots.
	// +optional
	Boots string `json:"boots,omitempty"`
	// next is the next time the rollout's standing changes by itself.
	// +optional
	Next *RolloutNextChange `json:"next,omitempty"`
	// external is the last change nodepool did not make to a field of the
	// pool's MachineDeployment (or an InPlace pool's MachineSet) that
	// rolls, pauses or holds its machines: written where the admission
	// policies are not installed, or by an identity they exempt. It is
	// recorded in the pool's history (initiator external) and the
	// controller restored its own values. It stays while its record is in
	// the history.
	// +optional
	External *ExternalChange `json:"external,omitempty"`
	// carriedDrift is the platform drift the rollout in progress applies
	// (its target boots the latest platform components), measured against
	// what the machines run. It is not pending (status.pendingManagementChanges)
	// while the rollout carries it; a rollout that ends without applying
	// it (rolled back, or superseded by an undo) leaves it pending with
	// the since it had, so that driftDeadline still counts from when the
	// nodes first differed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	CarriedDrift []PendingManagementChange `json:"carriedDrift,omitempty"`
}

// ExternalChange is a write nodepool did not make to the fields of a
// pool's MachineDeployment or MachineSet that roll, pause or hold its
// machines, as managedFields tell it.
type ExternalChange struct {
	// revision is the record of the change in the pool's history.
	Revision int64 `json:"revision"`
	// manager is the field manager that wrote the fields (managedFields).
	// +kubebuilder:validation:MaxLength=256
	Manager string `json:"manager"`
	// at is when the manager last wrote them (managedFields).
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// fields are the fields written, such as spec.rollout.after.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Fields []string `json:"fields"`
	// message says what the controller did.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
}

// RolloutHold is a rollout that waits.
type RolloutHold struct {
	// by is what holds it: Pause (spec.management.pausedUntil, which
	// outranks a maintenance window), MaintenanceWindow, Schedule (a forced
	// rollout set for later), HealthGate (a halted rollout holds a forced
	// rollout) or MissingUserData.
	By string `json:"by"`
	// until is when it may start; unset when a person must act, or no
	// window opens within five years.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// message says what waits and until when.
	// +optional
	Message string `json:"message,omitempty"`
}

// RolloutSteps are what a rollout does.
type RolloutSteps struct {
	// machines is how many machines it replaces (or updates in place).
	Machines int32 `json:"machines"`
	// rounds is in how many rounds of at most maxSurge+maxUnavailable
	// machines (InPlace: maxUnavailable nodes), the canary's included.
	Rounds int32 `json:"rounds"`
	// canary is how many machines go first under the health gate (0
	// without spec.management.health).
	// +optional
	Canary int32 `json:"canary,omitempty"`
	// soak is the time the health gate's soaks take in all.
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`
}

// RolloutNextChange is when a pool's standing changes by itself.
type RolloutNextChange struct {
	// at is when.
	At metav1.Time `json:"at"`
	// reason is why: PauseEnds, WindowOpens, ScheduledRollout,
	// DriftDeadline or SoakEnds.
	Reason string `json:"reason"`
}
