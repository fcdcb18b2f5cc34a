package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FleetRolloutAction is what a fleet rollout does to each pool.
// +kubebuilder:validation:Enum=ApplyPending;Restart
type FleetRolloutAction string

// Fleet rollout actions.
const (
	// FleetActionApplyPending applies pending platform (management) drift:
	// a pool without pending drift when its turn comes is skipped.
	FleetActionApplyPending FleetRolloutAction = "ApplyPending"
	// FleetActionRestart replaces every machine of every selected pool.
	FleetActionRestart FleetRolloutAction = "Restart"
)

// HeldPoolPolicy is what a fleet rollout does with a pool that cannot
// roll when its turn comes: paused, outside its maintenance window or in
// a maintenance exclusion.
// +kubebuilder:validation:Enum=Wait;Skip
type HeldPoolPolicy string

// Held-pool policies.
const (
	// HeldPoolWait waits for the pool: its wave does not complete until it
	// has rolled.
	HeldPoolWait HeldPoolPolicy = "Wait"
	// HeldPoolSkip skips the pool (recorded as skipped, with the reason).
	HeldPoolSkip HeldPoolPolicy = "Skip"
)

// FleetRolloutSpec says which pools roll, what they do, and in which
// waves. The selection (selectors, waves, action) is fixed once the
// rollout starts: the controller records on every selected pool its wave
// (annotation FleetRolloutPoolAnnotation(name)), and later label changes
// do not move pools between waves.
// +kubebuilder:validation:XValidation:rule="has(self.poolSelector) == has(oldSelf.poolSelector) && (!has(self.poolSelector) || self.poolSelector == oldSelf.poolSelector)",message="spec.poolSelector is immutable: the selection is fixed when the rollout starts; create a new FleetRollout to roll other pools"
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector) == has(oldSelf.namespaceSelector) && (!has(self.namespaceSelector) || self.namespaceSelector == oldSelf.namespaceSelector)",message="spec.namespaceSelector is immutable: the selection is fixed when the rollout starts; create a new FleetRollout to roll other pools"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancelled) || !oldSelf.cancelled || (has(self.cancelled) && self.cancelled)",message="spec.cancelled cannot be undone: a cancelled fleet rollout stays cancelled; create a new FleetRollout"
type FleetRolloutSpec struct {
	// poolSelector selects NodePools by their labels; unset or empty
	// selects every pool (of the namespaces namespaceSelector selects).
	// +optional
	PoolSelector *metav1.LabelSelector `json:"poolSelector,omitempty"`
	// namespaceSelector selects the namespaces whose pools roll, by the
	// namespaces' labels; unset or empty selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// action is ApplyPending (default: apply pending platform drift; a
	// pool without drift when its turn comes is skipped) or Restart
	// (replace every machine of every selected pool).
	// +optional
	// +kubebuilder:default=ApplyPending
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.action is immutable: create a new FleetRollout to do something else"
	Action FleetRolloutAction `json:"action,omitempty"`
	// waves are cumulative counts or percentages of the selected pools,
	// in order: [1, "25%", "100%"] rolls one pool, then up to a quarter of
	// the pools, then the rest. A percentage rounds up. Pools beyond the
	// last wave are not selected: end with "100%" to roll every pool.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:XIntOrString
	// +kubebuilder:validation:items:MaxLength=4
	// +kubebuilder:validation:items:XValidation:rule="type(self) == int ? self > 0 : string(self).matches('^([1-9][0-9]?|100)%$')",message="spec.waves: every wave must be a count above 0 or a percentage from 1% to 100% of the selected pools, such as 1, 10% or 100%"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.waves is immutable: the waves are fixed when the rollout starts; create a new FleetRollout"
	Waves []intstr.IntOrString `json:"waves"`
	// soak is how long to wait after a wave completes before the next
	// one starts, a duration such as 30m. Default 0.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="spec.soak must be a duration between 0s and 720h (30 days), such as 30m"
	Soak *metav1.Duration `json:"soak,omitempty"`
	// maxConcurrent is how many pools may roll at once (a pool counts
	// from the moment it is triggered until its rollout completes,
	// including while its own maintenance window holds it). Unset: every
	// pool of the wave at once.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
	// stopOn says when the rollout halts by itself.
	// +optional
	// +kubebuilder:default={}
	StopOn FleetStopConditions `json:"stopOn,omitempty"`
	// heldPools is what to do with a pool that is paused, outside its
	// maintenance window or in a maintenance exclusion when its turn
	// comes: Wait (default) or Skip.
	// +optional
	// +kubebuilder:default=Wait
	HeldPools HeldPoolPolicy `json:"heldPools,omitempty"`
	// paused stops triggering pools (pools rolling already finish);
	// clearing it continues (kubectl nodepool fleet rollout pause/resume).
	// +optional
	Paused bool `json:"paused,omitempty"`
	// cancelled ends the rollout for good: no further pool is triggered,
	// and a pool triggered whose rollout has not started is released.
	// Pools rolling already finish. It cannot be undone.
	// +optional
	Cancelled bool `json:"cancelled,omitempty"`
	// resumedAt clears a halt recorded before it (status.haltedAt): the
	// rollout continues, and halts again if a stop condition still holds.
	// kubectl nodepool fleet rollout resume sets it to now.
	// +optional
	ResumedAt *metav1.Time `json:"resumedAt,omitempty"`
}

// FleetStopConditions say when a fleet rollout halts.
type FleetStopConditions struct {
	// rolloutUnhealthy halts the rollout when a pool it triggered reports
	// RolloutHealthy False (its health gate halted, rolled back or ran out
	// of its progress deadline). Default true.
	// +optional
	// +kubebuilder:default=true
	RolloutUnhealthy *bool `json:"rolloutUnhealthy,omitempty"`
	// maxUnhealthyPools halts the rollout when more than this many pools it
	// triggered are unhealthy (RolloutHealthy False, or Ready False after
	// their rollout completed). Unset: no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxUnhealthyPools *int32 `json:"maxUnhealthyPools,omitempty"`
}

// FleetRolloutPhase is where a fleet rollout stands.
type FleetRolloutPhase string

// Phases of a fleet rollout.
const (
	FleetPhaseProgressing FleetRolloutPhase = "Progressing"
	FleetPhasePaused      FleetRolloutPhase = "Paused"
	FleetPhaseSoaking     FleetRolloutPhase = "Soaking"
	FleetPhaseHalted      FleetRolloutPhase = "Halted"
	FleetPhaseCancelled   FleetRolloutPhase = "Cancelled"
	FleetPhaseComplete    FleetRolloutPhase = "Complete"
)

// FleetPoolState is where one pool of a fleet rollout stands.
type FleetPoolState string

// States of a pool in a fleet rollout.
const (
	// FleetPoolPending: its wave has not started.
	FleetPoolPending FleetPoolState = "Pending"
	// FleetPoolWaiting: its wave started; it waits for a free slot
	// (maxConcurrent), its rollout in progress, its pause or its window.
	FleetPoolWaiting FleetPoolState = "Waiting"
	// FleetPoolRolling: triggered; its rollout has not completed.
	FleetPoolRolling FleetPoolState = "Rolling"
	// FleetPoolDone: its rollout completed (or it had no machine to replace).
	FleetPoolDone FleetPoolState = "Done"
	// FleetPoolSkipped: not rolled (no pending drift, held and
	// heldPools: Skip, deleted); the message says why.
	FleetPoolSkipped FleetPoolState = "Skipped"
	// FleetPoolFailed: its rollout reports RolloutHealthy False.
	FleetPoolFailed FleetPoolState = "Failed"
	// FleetPoolTakenOver: a person's later request (a newer
	// apply-pending) replaced the fleet's trigger; the pool counts as
	// rolling until what the fleet asked holds, then it is Done.
	FleetPoolTakenOver FleetPoolState = "TakenOver"
)

// FleetRolloutPool is one selected pool, with its wave: an entry of
// status.attention, and the per-pool state the controller keeps on each
// selected pool (its annotation FleetRolloutPoolAnnotation(name), without
// namespace and name) so that the FleetRollout's status stays bounded
// whatever the number of pools.
type FleetRolloutPool struct {
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// wave is the 1-based wave the pool belongs to.
	Wave  int32          `json:"wave"`
	State FleetPoolState `json:"state"`
	// triggeredAt is the apply-pending time written on the pool (every
	// machine created before it is replaced), written in the same patch
	// as the pool's apply-pending annotation, so a restarted controller
	// writes the same time again rather than a second rollout.
	// +optional
	TriggeredAt *metav1.Time `json:"triggeredAt,omitempty"`
	// revision is the pool's history revision recording the rollout.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// message says why the pool waits, was skipped, failed or was taken
	// over.
	// +optional
	Message string `json:"message,omitempty"`
}

// FleetRolloutWave counts the pools of one wave by state.
type FleetRolloutWave struct {
	// wave is the 1-based index.
	Wave int32 `json:"wave"`
	// pools is how many pools the wave holds.
	Pools   int32 `json:"pools"`
	Pending int32 `json:"pending"`
	Waiting int32 `json:"waiting"`
	Rolling int32 `json:"rolling"`
	Done    int32 `json:"done"`
	Skipped int32 `json:"skipped"`
	Failed  int32 `json:"failed"`
	// takenOver counts the pools a person's later request took over
	// whose rollout has not completed.
	// +optional
	TakenOver int32 `json:"takenOver,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when every pool of the wave was done or skipped; the
	// next wave starts soak later.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// predictedEnd is when the wave is forecast to complete (the rollout
	// engine and the fleet decision run in simulated time over its pools,
	// timed by each pool's rollout history), updated as waves finish;
	// unset when it is not forecast to complete without action.
	// +optional
	PredictedEnd *metav1.Time `json:"predictedEnd,omitempty"`
}

// FleetRolloutStatus is what the controller did.
type FleetRolloutStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase FleetRolloutPhase `json:"phase,omitempty"`
	// message says what the rollout waits for, or why it stopped.
	// +optional
	Message string `json:"message,omitempty"`
	// currentWave is the 1-based wave rolling or next to roll.
	// +optional
	CurrentWave int32 `json:"currentWave,omitempty"`
	// startedAt is when the pools were selected.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the rollout completed or was cancelled.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// predictedCompletion is when the rollout is forecast to complete:
	// its remaining waves carried out in simulated time by the rollout
	// engine and the fleet decision over its pools (their windows,
	// exclusions, deadlines, pauses, health gates, and durations from
	// each pool's rollout history; kubectl nodepool fleet forecast shows
	// the same per pool). Computed when the rollout starts and each time
	// a wave completes; unset while it is not forecast to complete within
	// 60 days without action (a pool held for good, a halt).
	// +optional
	PredictedCompletion *metav1.Time `json:"predictedCompletion,omitempty"`
	// haltedAt is when a stop condition halted the rollout; it stays
	// halted until spec.resumedAt is after it.
	// +optional
	HaltedAt *metav1.Time `json:"haltedAt,omitempty"`
	// +optional
	// +listType=atomic
	Waves []FleetRolloutWave `json:"waves,omitempty"`
	// attention lists the pools that need a person, at most
	// FleetAttentionMax: failed first, then taken over, then held (paused,
	// outside their window, in an exclusion). Every pool's state is kept
	// on the pool (annotation FleetRolloutPoolAnnotation(name)); kubectl
	// nodepool fleet rollout status shows every pool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Attention []FleetRolloutPool `json:"attention,omitempty"`
	// attentionOmitted counts the pools that need a person beyond those
	// attention lists.
	// +optional
	AttentionOmitted int32 `json:"attentionOmitted,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FleetRollout applies a platform update (pending drift, or a restart)
// across many NodePools in waves, with a soak between waves, a cap on
// pools rolling at once, and an automatic halt.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fr,categories=cluster-api
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name of a FleetRollout must be at most 63 characters: it names the annotation fleetrollout.nodepool.dev/<name> on each selected pool"
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.currentWave`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FleetRolloutSpec `json:"spec"`
	// +optional
	Status FleetRolloutStatus `json:"status,omitempty"`
}

// FleetRolloutList is a list of FleetRollouts.
// +kubebuilder:object:root=true
type FleetRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetRollout `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FleetRollout{}, &FleetRolloutList{})
}

// AnnotationFleetRollout on a NodePool names the FleetRollout that wrote
// its apply-pending annotation (nodepool.dev/apply-pending-at): the
// rollout it starts is recorded in the pool's history with the initiator
// FleetRolloutInitiator(name). The fleet rollout removes it when the
// pool's part is over.
const AnnotationFleetRollout = "nodepool.dev/fleet-rollout"

// FleetRolloutPoolAnnotationPrefix starts the annotation a fleet rollout
// keeps its per-pool state in, on each pool it selected:
// fleetrollout.nodepool.dev/<name>, a FleetRolloutPool in JSON (wave,
// state, triggeredAt, revision, message). The FleetRollout's own status
// holds only counts and the pools that need a person, so it stays bounded.
const FleetRolloutPoolAnnotationPrefix = "fleetrollout.nodepool.dev/"

// FleetRolloutPoolAnnotation is the per-pool state annotation of the
// fleet rollout name.
func FleetRolloutPoolAnnotation(name string) string { return FleetRolloutPoolAnnotationPrefix + name }

// FleetAttentionMax is how many pools status.attention lists at most.
const FleetAttentionMax = 50

// FleetRolloutInitiatorPrefix starts the history initiator of a rollout a
// fleet rollout started: "fleetrollout/<name>".
const FleetRolloutInitiatorPrefix = "fleetrollout/"

// FleetRolloutInitiator is the history initiator of the rollouts the
// fleet rollout name starts.
func FleetRolloutInitiator(name string) string { return FleetRolloutInitiatorPrefix + name }

// Condition types and reasons of a FleetRollout.
const (
	// FleetConditionProgressing is True while the rollout triggers pools
	// or soaks between waves; False once paused, halted, cancelled or
	// complete (the reason is the phase).
	FleetConditionProgressing = "Progressing"
	// FleetConditionHalted is True while a stop condition holds the
	// rollout; its message names the pools.
	FleetConditionHalted = "Halted"
)
