package v1alpha1

// The node update protocol of InPlace pools. It is carried by annotations
// on each Node of the workload cluster, so any node agent (a DaemonSet, a
// systemd unit, the sim provider) can take part without a client of the
// management cluster:
//
//  1. The controller cordons the Node, drains it through the Eviction API,
//     then writes AnnotationDesiredPayload (the payload hash to converge to)
//     and AnnotationUpdateSecret ("<namespace>/<name>" of a Secret in the
//     workload cluster whose key "value" is an Ignition pointer config: the
//     payload server's URL, CA and the pool's bearer token).
//  2. The node's agent fetches the payload with that pointer config,
//     checks it is the desired one, applies it, and reports on the Node:
//     AnnotationUpdateState Working while it does, then
//     AnnotationNodeCurrentPayload (the hash it now runs) and
//     AnnotationUpdateState Done; or Degraded with AnnotationUpdateMessage
//     saying why. An agent retries a Degraded update when the cause is gone.
//  3. The controller sees current == desired and Done, records the machine
//     as updated (AnnotationMachineUserData, AnnotationUpdatedAt and
//     spec.version of its Machine), uncordons the Node and moves on, never more than
//     spec.management.inPlace.maxUnavailable Nodes at once.
const (
	// AnnotationDesiredPayload on a Node is the payload hash the controller
	// asks the node to run.
	AnnotationDesiredPayload = "update.nodepool.dev/desired-payload"
	// AnnotationUpdateSecret on a Node is "<namespace>/<name>" of the Secret
	// in the workload cluster holding the pointer config (key "value") to
	// fetch the desired payload with.
	AnnotationUpdateSecret = "update.nodepool.dev/secret"
	// AnnotationNodeCurrentPayload on a Node is the payload hash the node runs,
	// written by its agent after an update.
	AnnotationNodeCurrentPayload = "update.nodepool.dev/current-payload"
	// AnnotationUpdateState on a Node is the agent's state: Working, Done
	// or Degraded.
	AnnotationUpdateState = "update.nodepool.dev/state"
	// AnnotationUpdateMessage on a Node says why an update is Degraded.
	AnnotationUpdateMessage = "update.nodepool.dev/message"

	// AnnotationUpdatePhase on a Node is the controller's own progress
	// with it: Draining, then Updating; absent when no update is in
	// progress on the Node.
	AnnotationUpdatePhase = "update.nodepool.dev/phase"
	// AnnotationUpdateRequestedAt on a Node is when the controller last
	// asked its agent for a payload: an agent that has not answered Done
	// or Degraded within the controller's node agent timeout holds the
	// update as Degraded.
	AnnotationUpdateRequestedAt = "update.nodepool.dev/requested-at"
	// AnnotationUpdateStartedAt on a Node is when the controller cordoned
	// it for the update (RFC3339); the pool's drain timeout counts from it.
	AnnotationUpdateStartedAt = "update.nodepool.dev/started-at"
	// AnnotationDrainBlocked on a Node being drained says why the last
	// eviction was refused (a PodDisruptionBudget); absent when none was.
	AnnotationDrainBlocked = "update.nodepool.dev/drain-blocked"
	// AnnotationWasUnschedulable on a Node says it was cordoned before the
	// update started, so the controller leaves it cordoned afterwards.
	AnnotationWasUnschedulable = "update.nodepool.dev/was-unschedulable"
	// AnnotationUpdatedAt on a Machine of an InPlace pool is when its node
	// last finished an in-place update (RFC3339); a forced rollout updates
	// every machine updated (or created) before its time.
	AnnotationUpdatedAt = "update.nodepool.dev/updated-at"
	// AnnotationMachineUserData on a Machine of an InPlace pool names the
	// user-data Secret its node runs. Cluster API rewrites every Machine's
	// spec.bootstrap.dataSecretName to the MachineSet's template, so what a
	// machine runs is recorded here: from its bootstrap data when the
	// controller first sees it, then at each in-place update.
	AnnotationMachineUserData = "update.nodepool.dev/user-data"
	// AnnotationInPlaceRolloutAfter on the MachineSet of an InPlace pool is
	// the last forced rollout's time (the MachineDeployment's
	// spec.rollout.after of Replace pools).
	AnnotationInPlaceRolloutAfter = "update.nodepool.dev/rollout-after"
)

// Node agent states (AnnotationUpdateState).
const (
	UpdateStateWorking  = "Working"
	UpdateStateDone     = "Done"
	UpdateStateDegraded = "Degraded"
)

// Controller phases of a Node's update (AnnotationUpdatePhase).
const (
	UpdatePhaseDraining = "Draining"
	UpdatePhaseUpdating = "Updating"
)
