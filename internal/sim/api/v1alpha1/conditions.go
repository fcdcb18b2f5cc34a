package v1alpha1

// Condition types of a SimMachine.
const (
	// ConditionReady mirrors Booted; Cluster API copies it into the
	// Machine's InfrastructureReady condition, so `kubectl get machines`
	// says why a machine is not up.
	ConditionReady = "Ready"
	// ConditionBooted is True once the machine fetched and validated its
	// payload and registered its Node; its reason says where booting stopped.
	ConditionBooted = "Booted"
	// ConditionNodeHealthy is True while the machine's Node is Ready.
	ConditionNodeHealthy = "NodeHealthy"
)

// Condition types of a SimControlPlane.
const (
	// ConditionAvailable is True once the <cluster>-kubeconfig Secret exists.
	ConditionAvailable = "Available"
)

// Reasons of the Booted (and Ready) condition, in the order a boot meets them.
const (
	// ReasonWaitingForBootstrapData: the Machine has no
	// spec.bootstrap.dataSecretName yet, or the Secret does not exist.
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// ReasonBootFailed: the machine was told to fail (spec.failBoot or
	// annotation AnnotationFailBoot) and does not boot while it is.
	ReasonBootFailed = "BootFailed"
	// ReasonBooting: the machine is powering on (boot delay).
	ReasonBooting = "Booting"
	// ReasonInvalidUserData: the user-data is not an Ignition pointer config
	// the machine can follow. Not retried until the Secret changes.
	ReasonInvalidUserData = "InvalidUserData"
	// ReasonPayloadServerRefused: the payload server answered with an HTTP
	// error, named in the message. 5xx (511 for a token it does not know)
	// is retried with backoff like Ignition does; any other answer is not
	// retried until the user-data changes.
	ReasonPayloadServerRefused = "PayloadServerRefused"
	// ReasonPayloadServerUnreachable: no HTTP answer (connection or TLS
	// error); retried with backoff.
	ReasonPayloadServerUnreachable = "PayloadServerUnreachable"
	// ReasonInvalidPayload: the fetched payload is not a valid Ignition
	// config or not a nodepool payload. Not retried (Ignition would stop
	// the boot) until the machine's user-data changes.
	ReasonInvalidPayload = "InvalidPayload"
	// ReasonRegisteringNode: the payload is valid but the Node could not be
	// written to the workload cluster yet; retried.
	ReasonRegisteringNode = "RegisteringNode"
	// ReasonBooted: the machine runs its payload and its Node is registered.
	ReasonBooted = "Booted"
	// ReasonDeleting: the machine is being deleted with its Node.
	ReasonDeleting = "Deleting"
)

// Reasons of the NodeHealthy condition.
const (
	// ReasonNodeReady: the Node is Ready.
	ReasonNodeReady = "NodeReady"
	// ReasonNodeUnhealthy: the machine was told to be unhealthy
	// (spec.unhealthy or AnnotationUnhealthy), so its Node is NotReady.
	ReasonNodeUnhealthy = "NodeUnhealthy"
	// ReasonNoNode: the machine has not registered a Node yet.
	ReasonNoNode = "NoNode"
)

// Reasons of the SimControlPlane's Available condition.
const (
	// ReasonWaitingForCluster: no Cluster owns the control plane yet.
	ReasonWaitingForCluster = "WaitingForCluster"
	// ReasonKubeconfigReady: the <cluster>-kubeconfig Secret exists.
	ReasonKubeconfigReady = "KubeconfigReady"
	// ReasonKubeconfigNotOwned: a <cluster>-kubeconfig Secret exists that the
	// control plane did not create; it is used as it is.
	ReasonKubeconfigNotOwned = "KubeconfigNotOwned"
)

// Annotations that set a knob on one machine. Put them on the SimMachine or
// on its Machine (`kubectl annotate machine m1 sim.nodepool.dev/unhealthy=true`);
// they win over the spec.
const (
	// AnnotationFailBoot "true" makes the machine fail to boot (spec.failBoot).
	AnnotationFailBoot = "sim.nodepool.dev/fail-boot"
	// AnnotationUnhealthy "true" makes the machine's Node NotReady
	// (spec.unhealthy); "false" or removing it makes it Ready again.
	AnnotationUnhealthy = "sim.nodepool.dev/unhealthy"
	// AnnotationBootDelay is a Go duration ("10s") from the machine's
	// creation to fetching its payload (spec.bootDelay).
	AnnotationBootDelay = "sim.nodepool.dev/boot-delay"
	// AnnotationUpdateDelay is a Go duration ("5s") the machine's node
	// agent takes to apply an in-place update (spec.updateDelay).
	AnnotationUpdateDelay = "sim.nodepool.dev/update-delay"
	// AnnotationFailUpdate makes the machine's node agent fail in-place
	// updates: the Node reports Degraded with the annotation's value as the
	// message (spec.failUpdate). "false" or removing it lets the update go on.
	AnnotationFailUpdate = "sim.nodepool.dev/fail-update"
	// AnnotationWorkloads lists the pods the machine's Node runs
	// (spec.workloads), such as "guarded,bare,slow=90s".
	AnnotationWorkloads = "sim.nodepool.dev/workloads"
)

// AnnotationWorkloadsPlaced on a Node lists the workload pods the sim put
// on it since it registered: a pod no controller owns is placed once, as a
// person would, and never again once evicted.
const AnnotationWorkloadsPlaced = "sim.nodepool.dev/workloads-placed"

// LabelWorkload on a pod of the sim names its workload (guarded, bare,
// slow, local, daemon); LabelWorkloadNode names the SimMachine whose Node
// runs it.
const (
	LabelWorkload     = "sim.nodepool.dev/workload"
	LabelWorkloadNode = "sim.nodepool.dev/machine"
)

// LabelClusterNamespace and LabelClusterName on a Node name its Cluster:
// every simulated Node lives on one API server, and a Cluster's view of it
// (its kubeconfig Secret, when the sim serves views) holds the Nodes
// labelled with it only.
const (
	LabelClusterNamespace = "sim.nodepool.dev/cluster-namespace"
	LabelClusterName      = "sim.nodepool.dev/cluster-name"
)

// AnnotationUpdateStarted on a Node is when the sim's node agent started
// the in-place update it is working on (RFC3339 with nanoseconds): the
// update delay counts from it. The agent removes it when the update is done,
// told to fail or no longer asked for.
const AnnotationUpdateStarted = "sim.nodepool.dev/update-started"

// Reasons of the Events the sim's node agent records on a SimMachine.
const (
	// ReasonUpdatedInPlace: the node applied the desired payload in place.
	ReasonUpdatedInPlace = "UpdatedInPlace"
	// ReasonUpdateDegraded: the node cannot apply the desired payload; the
	// Event and the Node's update message say why.
	ReasonUpdateDegraded = "UpdateDegraded"
)

// Finalizers.
const (
	// MachineFinalizer lets the provider delete a SimMachine's Node first.
	MachineFinalizer = "infrastructure.sim.nodepool.dev/node"
)

// ProviderIDPrefix starts every providerID of the sim: sim://<namespace>/<name>.
const ProviderIDPrefix = "sim://"
