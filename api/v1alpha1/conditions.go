package v1alpha1

// Condition types of a NodePool.
const (
	// ConditionReady is True when the pool's machines exist, their nodes are
	// ready and nothing blocks scaling.
	ConditionReady = "Ready"
	// ConditionUpdatingConfig is True while a rollout of owner configuration
	// (the rollout hash without version) is in progress.
	ConditionUpdatingConfig = "UpdatingConfig"
	// ConditionUpdatingVersion is True while a rollout to a new Kubernetes
	// version is in progress.
	ConditionUpdatingVersion = "UpdatingVersion"
	// ConditionConfigUpdatePending is True when management components differ
	// between the running nodes and the latest payload (see
	// status.pendingManagementChanges).
	ConditionConfigUpdatePending = "ConfigUpdatePending"
	// ConditionValidMachineConfig is False when a referenced config cannot be
	// read or parsed.
	ConditionValidMachineConfig = "ValidMachineConfig"
	// ConditionValidGeneratedPayload is False when the rendered payload does
	// not validate.
	ConditionValidGeneratedPayload = "ValidGeneratedPayload"
	// ConditionReachedIgnitionEndpoint is True once a machine of the pool has
	// fetched its payload from the payload server.
	ConditionReachedIgnitionEndpoint = "ReachedIgnitionEndpoint"
	// ConditionReconciliationActive is False when the controller does not act
	// on the pool (paused, or an unsupported setting).
	ConditionReconciliationActive = "ReconciliationActive"
	// ConditionAllMachinesReady is True when every machine is ready.
	ConditionAllMachinesReady = "AllMachinesReady"
	// ConditionAllNodesHealthy is True when every node is healthy.
	ConditionAllNodesHealthy = "AllNodesHealthy"
	// ConditionBootstrapDataAvailable is True when every user-data, token
	// and payload Secret the pool's machines depend on exists, is the
	// controller's own and is not being deleted.
	ConditionBootstrapDataAvailable = "BootstrapDataAvailable"
	// ConditionMaintenanceWindow is True when a rollout the pool's
	// maintenance settings gate may start now (inside a window, or the pool
	// has no windows), False while one waits (ReasonOutsideMaintenanceWindow,
	// ReasonInMaintenanceExclusion); the message names the next window.
	ConditionMaintenanceWindow = "MaintenanceWindow"
	// ConditionRolloutHealthy is False when the pool's health gate stopped
	// or is undoing a rollout (ReasonRolloutHalted, ReasonRollingBack,
	// ReasonProgressDeadlineExceeded); the message names the machine and
	// the failing signal.
	ConditionRolloutHealthy = "RolloutHealthy"
)

// Condition reasons of a NodePool.
const (
	// ReasonAsExpected is the reason of a condition in its normal state.
	ReasonAsExpected = "AsExpected"
	// ReasonManagementConfigDrift says management components differ between
	// the running nodes and the latest payload.
	ReasonManagementConfigDrift = "ManagementConfigDrift"
	// ReasonRolloutInProgress says machines are being replaced or updated.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutScheduled says a forced rollout waits for rolloutAfter.
	ReasonRolloutScheduled = "RolloutScheduled"
	// ReasonPaused says no rollout starts until pausedUntil.
	ReasonPaused = "Paused"
	// ReasonConfigNotFound says a referenced ConfigMap or Secret is missing.
	ReasonConfigNotFound = "ConfigNotFound"
	// ReasonInvalidConfig says a referenced config does not parse or is refused.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonInvalidPayload says the rendered payload does not validate.
	ReasonInvalidPayload = "InvalidPayload"
	// ReasonIgnitionNotReached says no machine has fetched the payload yet.
	ReasonIgnitionNotReached = "IgnitionNotReached"
	// ReasonClusterNotFound says the Cluster API Cluster does not exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterNotReady says the Cluster API Cluster exists but lacks
	// what a payload needs (its control-plane endpoint).
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonUnsupported says a setting is accepted by the API but not yet
	// acted on by this controller.
	ReasonUnsupported = "Unsupported"
	// ReasonMachinesNotReady says some machines are not ready.
	ReasonMachinesNotReady = "MachinesNotReady"
	// ReasonNodesUnhealthy says some nodes are not healthy.
	ReasonNodesUnhealthy = "NodesUnhealthy"
	// ReasonNodeUpdateDegraded says a node of an InPlace pool failed its
	// update: the update is stopped until it recovers.
	ReasonNodeUpdateDegraded = "NodeUpdateDegraded"
	// ReasonUserDataMissing says the user-data Secret the machines
	// reference is gone and cannot be rebuilt (its token is gone too).
	ReasonUserDataMissing = "UserDataMissing"
	// ReasonSecretInUse says someone deleted a Secret the machines still
	// depend on: it is kept until nothing references it.
	ReasonSecretInUse = "SecretDeletedWhileInUse"
	// ReasonNameConflict says an object of a name the pool uses exists
	// and is not the pool's: the controller leaves it untouched.
	ReasonNameConflict = "NameConflict"
	// ReasonPayloadTooLarge says the rendered payload does not fit in a
	// Secret.
	ReasonPayloadTooLarge = "PayloadTooLarge"
	// ReasonDrainBlocked says an InPlace update waits for a node's drain
	// (a PodDisruptionBudget refuses an eviction).
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonApplyFailed says a write of the reconcile failed (the message
	// has the API server's answer).
	ReasonApplyFailed = "ApplyFailed"
	// ReasonReadFailed says the pool's objects or inputs could not be read.
	ReasonReadFailed = "ReadFailed"
	// ReasonClusterPaused says the pool's Cluster is paused (spec.paused,
	// which clusterctl move sets while it moves the cluster, or the
	// cluster.x-k8s.io/paused annotation) or the pool carries that
	// annotation: the controller writes nothing to the pool's objects
	// (ReconciliationActive=False) until the pause ends.
	ReasonClusterPaused = "ClusterPaused"
	// ReasonOutsideMaintenanceWindow says a gated rollout waits for the
	// pool's next maintenance window.
	ReasonOutsideMaintenanceWindow = "OutsideMaintenanceWindow"
	// ReasonInMaintenanceExclusion says a gated rollout waits for a
	// maintenance exclusion to end.
	ReasonInMaintenanceExclusion = "InMaintenanceExclusion"
	// ReasonRolloutHalted says the health gate stopped a rollout: no
	// further machine is replaced until the owner changes the pool.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRollingBack says the health gate is returning the pool to the
	// previous revision's payload.
	ReasonRollingBack = "RollingBack"
	// ReasonProgressDeadlineExceeded says a new machine did not become
	// healthy within the pool's progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// Annotations, labels and finalizers.
const (
	// AnnotationCurrentRolloutConfig records the rollout hash (without
	// version) the pool's nodes run.
	AnnotationCurrentRolloutConfig = "nodepool.dev/current-rollout-config"
	// AnnotationCurrentPayload records the payload hash pinned for the nodes.
	AnnotationCurrentPayload = "nodepool.dev/current-payload"
	// AnnotationHalted on the current rollout's record (its
	// ControllerRevision) records that the health gate halted that rollout:
	// "<rollout hash>/<payload hash>/<machine>", the rollout that failed,
	// the payload it failed on and the machine that failed first. While the
	// rollout lasts no further machine is replaced, and new and replacement
	// machines boot the last healthy payload, even once the failed machine
	// is gone. It ends with its rollout: a new rollout (an owner change,
	// even the same change applied again) starts clean. A resume request
	// (AnnotationResume) ends it. The record keys are the annotation names
	// an older nodepool wrote on the pool; the controller moves those.
	AnnotationHalted = "nodepool.dev/halted"
	// AnnotationForcedFrom on a forced rollout's record holds
	// "<rollout hash>/<payload hash>/<forced payload hash>": the payload
	// the rollout's token served before the force, which a halted forced
	// rollout returns new machines to (its payload Secret is kept
	// meanwhile), and the payload the forced rollout boots, which a
	// resumed one goes on with (whatever the platform changed since).
	// Written by an older nodepool without the third part, a resume goes
	// on with the latest payload.
	AnnotationForcedFrom = "nodepool.dev/forced-from"
	// AnnotationApplyPending on a NodePool asks the controller, on the
	// platform's behalf, to apply pending management drift: its value is an
	// RFC3339 time; every machine created before it is replaced once
	// (`kubectl nodepool rollout apply-pending` sets it to now).
	AnnotationApplyPending = "nodepool.dev/apply-pending-at"
	// AnnotationRolledBack on the current rollout's record holds the
	// rollout hash the health gate rolled back: while the pool's inputs
	// still render to it, the engine keeps the previous revision, and the
	// forced rollouts that follow (whose records carry it on) boot that
	// revision, never the payload that failed. Any other owner change
	// supersedes it.
	AnnotationRolledBack = "nodepool.dev/rolled-back"
	// AnnotationResume on a NodePool asks the controller to resume the
	// halted rollout whose revision it names (`kubectl nodepool rollout
	// resume` sets it to status.rollout.revision): its health halt ends
	// and a drain halt is excused. The controller removes the request once
	// carried out; a request naming a rollout that is no longer the
	// current one resumes nothing.
	AnnotationResume = "nodepool.dev/resume"
	// AnnotationRestoredTemplate on a Replace pool's MachineSet records
	// the template values the controller wrote back over an edit made
	// outside the pool, as a JSON object of field name to value. Cluster
	// API applies a MachineSet whole, from its cache, and can write the
	// edited values back over the restore; while the MachineDeployment
	// still holds the recorded values, the controller restores them again.
	AnnotationRestoredTemplate = "nodepool.dev/restored-template"
	// LabelPool names the pool (its name) an object belongs to.
	LabelPool = "nodepool.dev/pool"
	// LabelPayload is the node label carrying a prefix of the payload hash
	// the node booted.
	LabelPayload = "nodepool.dev/payload"
	// AnnotationBootedPayload on a Node is the full payload hash of the
	// payload the node booted (LabelPayload holds only a prefix).
	AnnotationBootedPayload = "nodepool.dev/booted-payload"
	// LabelTemplateSourceUID and LabelTemplateSourceGeneration on an
	// infrastructure template clone are the UID and generation of the
	// template it was cloned from, and AnnotationTemplateSourceSpec the
	// template's spec then, as the canonical JSON its name was derived
	// from. A template whose generation is unchanged is the owner's same
	// intent: its content is read from this record, so a provider upgrade
	// that defaults a new field or serves a new version rolls no pool.
	LabelTemplateSourceUID        = "nodepool.dev/template-source-uid"
	LabelTemplateSourceGeneration = "nodepool.dev/template-source-generation"
	AnnotationTemplateSourceSpec  = "nodepool.dev/template-source-spec"
	// Finalizer lets the controller clean up a deleted pool's objects.
	Finalizer = "nodepool.dev/finalizer"
	// FinalizerInUse is on every user-data, token and payload Secret the
	// controller makes: a Secret machines may still boot from survives a
	// kubectl delete until the controller finds it unreferenced.
	FinalizerInUse = "nodepool.dev/in-use"
)

// Reasons of ConditionMaintenanceWindow beside the shared ones.
const (
	// ReasonInMaintenanceWindow says a gated rollout may start now: a
	// maintenance window is open (or the pool has none) and no exclusion
	// holds it.
	ReasonInMaintenanceWindow = "InMaintenanceWindow"
	// ReasonInvalidMaintenanceSettings says a schedule or time zone of
	// spec.management.maintenance cannot be read: gated rollouts are held
	// until it is corrected.
	ReasonInvalidMaintenanceSettings = "InvalidMaintenanceSettings"
)

// AnnotationDrainHalted on the current rollout's record records that a
// drain halted that rollout (the pool's spec.management.drain.onTimeout is
// Halt): "<rollout hash>/<machine>", with "/resumed" once a resume request
// excused the drain. It ends with its rollout, or when no rollout is in
// progress and the drain is over.
const AnnotationDrainHalted = "nodepool.dev/drain-halted"

// ReasonDrainHalted: a node did not drain within
// spec.management.drain.timeout and onTimeout is Halt (RolloutHealthy).
const ReasonDrainHalted = "DrainHalted"
