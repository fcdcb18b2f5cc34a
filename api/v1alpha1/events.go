package v1alpha1

// Reasons of the events the controller emits on a NodePool, beside the
// condition vocabulary (conditions.go). A Warning reason names a fault;
// the rest describe rollouts as they happen.
const (
	// EventRolloutStarted: an owner change starts rolling the machines.
	EventRolloutStarted = "RolloutStarted"
	// EventRolloutForced: a forced rollout (restart, apply-pending,
	// managementUpdates: Rollout) starts.
	EventRolloutForced = "RolloutForced"
	// EventRolloutResumed: a resume request (AnnotationResume) ended the
	// current rollout's halt.
	EventRolloutResumed = "RolloutResumed"
	// EventResumeIgnored: a resume request named a rollout that is not the
	// current one (it ended since), or no revision: nothing was resumed.
	EventResumeIgnored = "ResumeIgnored"
	// EventRolloutDeferred: a rollout waits for the pool's pause to end.
	EventRolloutDeferred = "RolloutDeferred"
	// EventRolloutComplete: every machine runs the target.
	EventRolloutComplete = "RolloutComplete"
	// EventScaleUpWaitsForCanary: a scale-up during a health gate's canary
	// waits until the canary passed (or failed): Cluster API would make
	// every new machine on the payload no canary has passed yet.
	EventScaleUpWaitsForCanary = "ScaleUpWaitsForCanary"
	// EventManagementConfigDrift: on a pool, a component of its own
	// namespace (its pull secret's or trust bundle's content) joined its
	// pending drift. A platform bump drifts every pool at once and is
	// EventManagementConfigChanged instead, once.
	EventManagementConfigDrift = "ManagementConfigDrift"
	// EventManagementConfigChanged: on the management config ConfigMap,
	// once per change, naming the fields that changed.
	EventManagementConfigChanged = "ManagementConfigChanged"
	// EventSeeded and EventCorrected: an annotation that mirrors what the
	// machines run was missing or wrong and was set from their user-data
	// (not said when a new pool records its first machines').
	EventSeeded    = "Seeded"
	EventCorrected = "Corrected"
	// EventUserDataRestored (Warning): a user-data Secret machines use was
	// missing and was rebuilt from its token, or named the payload before
	// the forced rollout that rolls it (its rewrite was lost) and is
	// written again from the rollout's record.
	EventUserDataRestored = "UserDataRestored"
	// EventPayloadMissing (Warning): a payload a token serves is gone; the
	// token moves to the latest payload.
	EventPayloadMissing = "PayloadMissing"
	// EventPayloadRefused (Warning): a payload Secret carrying the pool's
	// label is not used: not named for the payload it claims, content that
	// does not give its hash, or the pool's payload name without the pool
	// as its controller; or a token Secret under the name the controller
	// gives a token that the controller did not write (its binding does
	// not verify: it is deleted, never mirrored or served). The message
	// names the Secret and why, never its content.
	EventPayloadRefused = "PayloadRefused"
	// EventUpdatingNode, EventNodeUpdated and EventDrainTimedOut (Warning)
	// follow an InPlace pool's node updates.
	EventUpdatingNode  = "UpdatingNode"
	EventNodeUpdated   = "NodeUpdated"
	EventDrainTimedOut = "DrainTimedOut"
	// EventDrainBlocked (Warning): a node has drained for
	// spec.management.drain.timeout (10m unless set) with pods left; the
	// message names the node, the pods, their PodDisruptionBudget and what
	// happens now.
	EventDrainBlocked = "DrainBlocked"
	// EventNameConflict (Warning): an object of a name the pool uses
	// belongs to someone else; nothing is written while it lasts.
	EventNameConflict = ReasonNameConflict
	// EventRolloutHalted, EventProgressDeadlineExceeded and
	// EventRollingBack (Warning): the health gate stopped a rollout or
	// rolls it back; the message names the machine and the failing signal.
	EventRolloutHalted            = ReasonRolloutHalted
	EventProgressDeadlineExceeded = ReasonProgressDeadlineExceeded
	EventRollingBack              = ReasonRollingBack
	// EventMachineDeploymentResumed (Warning): the pool's MachineDeployment
	// was paused (spec.paused) by someone else, such as `clusterctl alpha
	// rollout pause` where the admission policy
	// nodepool-owns-machinedeployments is not installed; the controller
	// resumed it. A pool pauses with `kubectl nodepool rollout pause`.
	EventMachineDeploymentResumed = "MachineDeploymentResumed"
	// EventExternalChangeReverted (Warning): a field of the pool's
	// MachineDeployment (or an InPlace pool's MachineSet) that rolls,
	// pauses or holds its machines was written by someone other than
	// nodepool (where the admission policies are not installed, or by an
	// identity they exempt); the message names the field manager and the
	// fields. The change is recorded in the pool's history (initiator
	// external) and the controller restored its own values.
	EventExternalChangeReverted = "ExternalChangeReverted"
	// EventExternalChangeRecorded (Warning): as ExternalChangeReverted,
	// for a change the controller could not undo (an edited MachineSet of
	// a Replace pool that was not its newest: its values before the edit
	// are kept nowhere); the message says why. It is recorded only
	// (outcome Recorded).
	EventExternalChangeRecorded = "ExternalChangeRecorded"
)

// Events of maintenance windows.
const (
	// EventRolloutOutsideMaintenanceWindow (Warning): a forced rollout
	// started outside the maintenance windows on the emergency path; the
	// message has the reason given.
	EventRolloutOutsideMaintenanceWindow = "RolloutOutsideMaintenanceWindow"
	// EventDriftDeadlineReached: pending platform drift is older than
	// spec.management.maintenance.driftDeadline and is applied at the next
	// window.
	EventDriftDeadlineReached = "DriftDeadlineReached"
)

// Reasons of the events a FleetRollout controller emits, on the FleetRollout
// and on each pool it triggers.
const (
	// EventFleetRolloutStarted: the pools were selected and assigned waves.
	EventFleetRolloutStarted = "FleetRolloutStarted"
	// EventFleetWaveStarted and EventFleetWaveComplete follow the waves.
	EventFleetWaveStarted  = "FleetWaveStarted"
	EventFleetWaveComplete = "FleetWaveComplete"
	// EventFleetPoolTriggered (on the FleetRollout and on the pool): the
	// pool was annotated to roll.
	EventFleetPoolTriggered = "FleetPoolTriggered"
	// EventFleetPoolSkipped: a pool was skipped (no drift, held, deleted).
	EventFleetPoolSkipped = "FleetPoolSkipped"
	// EventFleetPoolTakenOver: a person's later request replaced the
	// fleet's trigger of a pool.
	EventFleetPoolTakenOver = "FleetPoolTakenOver"
	// EventFleetRolloutHalted (Warning): a stop condition halted the rollout.
	EventFleetRolloutHalted = "FleetRolloutHalted"
	// EventFleetRolloutResumed: spec.resumedAt cleared a halt.
	EventFleetRolloutResumed = "FleetRolloutResumed"
	// EventFleetRolloutCancelled and EventFleetRolloutComplete end it.
	EventFleetRolloutCancelled = "FleetRolloutCancelled"
	EventFleetRolloutComplete  = "FleetRolloutComplete"
)
