package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// Input is everything the engine decides from, gathered once per reconcile.
type Input struct {
	// Pool is the NodePool as read (spec, annotations, status).
	Pool *nodepoolv1.NodePool
	// Now is the clock.
	Now time.Time
	// Latest is the payload rendered from the current inputs, and Hashes
	// its hashes. Both are nil/zero when RenderErr is set.
	Latest *payload.Payload
	Hashes payload.Hashes
	// TemplateName is the name of the infrastructure template clone for the
	// current inputs (named after its content).
	TemplateName string
	// RenderErr is why the current inputs could not be gathered or
	// rendered (a missing or bad ConfigMap, an invalid payload). A bad
	// input never disrupts running nodes: the engine keeps what exists.
	RenderErr error
	// MachineDeployment is the pool's MachineDeployment, nil if absent.
	MachineDeployment *MachineDeployment
	// UserData are the pool's user-data Secrets, by name.
	UserData map[string]UserData
	// Tokens are the pool's token Secrets, by name.
	Tokens map[string]Token
	// Payloads are the pool's stored payloads, by payload hash.
	Payloads map[string]*payload.Payload
	// Referenced holds every Secret name a MachineDeployment, MachineSet or
	// Machine of the pool uses as bootstrap data.
	Referenced map[string]bool
	// DeletedInUse names the pool's Secrets someone deleted while the
	// in-use finalizer keeps them: they stay until unreferenced.
	DeletedInUse []string
	// Nodes are the pool's Nodes in the workload cluster.
	Nodes []Node
	// NodesUnread says the workload cluster's Nodes could not be read (its
	// connection is not up yet, as in the first seconds after a restart):
	// Nodes is empty, and what the pool's status says of its nodes is
	// their last known state, which the plan keeps (NodeCounts).
	NodesUnread bool
	// Settings of the controller.
	Settings Settings
	// InPlace is set for InPlace pools: their machines and Nodes.
	// MachineDeployment then summarises the pool's MachineSet.
	InPlace *InPlace
	// RecentRollouts are the pool's recent finished rollouts (from its
	// history, newest first: duration, outcome, machines, rounds, soaks),
	// for the prediction of whether a rollout fits its maintenance window.
	RecentRollouts []poolmath.PastRollout
	// Machines are the pool's machines as the health gate sees them
	// (health.go); read for pools with spec.management.health.
	Machines []MachineHealth
	// Drains are the nodes of deleting Machines Cluster API drains
	// (Replace pools); an InPlace pool's drains are its InPlace machines
	// in the Draining phase.
	Drains []NodeDrain
	// DrainPods are the pods on the pool's nodes and their namespaces'
	// PodDisruptionBudgets, read from the workload cluster by `plan` for a
	// rollout it predicts (drain_predict.go); nil in the controller.
	DrainPods *DrainPods
	// Current is the pool's current rollout as its record says (the
	// newest record of the pool's history that is a rollout of the
	// controller's, not an outside change); nil when the pool has none.
	Current *CurrentRollout
}

// CurrentRollout is the pool's current rollout record: its revision and
// what the engine keeps on it while the rollout lasts (record.go).
type CurrentRollout struct {
	Revision int64
	// RolloutHash is the rollout the record is of, Started when it
	// started; InProgress is true until it ends (Complete, Superseded,
	// Failed) and Forced for a forced rollout (the record has a forcedAt).
	RolloutHash string
	Started     time.Time
	InProgress  bool
	Forced      bool
	// ForcedAt is a forced rollout's time (the record's forcedAt): the
	// MachineDeployment carries it once its rollout.after is not before.
	ForcedAt *time.Time
	// State holds the record's keys of RecordKeys, by key.
	State map[string]string
}

// Settings are the controller's tunables the engine needs.
type Settings struct {
	// TokenTTL is how long a token stays valid; it rotates at half of it.
	TokenTTL time.Duration
	// CleanupGracePeriod is how long an unreferenced Secret is kept.
	CleanupGracePeriod time.Duration
	// NodeAgentTimeout is how long an InPlace node's agent may take to
	// finish an update it was asked for before the update holds as
	// Degraded; 0 waits forever.
	NodeAgentTimeout time.Duration
	// ResyncPeriod is the longest the controller waits before looking at a
	// pool again (0: only when something changes).
	ResyncPeriod time.Duration
}

// MachineDeployment is the observed state of the pool's MachineDeployment.
type MachineDeployment struct {
	// DataSecretName is the user-data its template references: the target.
	DataSecretName string
	// Version is its template's Kubernetes version.
	Version string
	// RunningDataSecretName is the user-data the pool's machines run: the
	// template's once the rollout is complete, the oldest MachineSet's
	// while a rollout is in progress.
	RunningDataSecretName string
	// SpecReplicas is its spec.replicas (nil when unset): for an
	// autoscaled pool, the autoscaler's count.
	SpecReplicas *int32
	// Complete is true when every machine is on the template and no old
	// machine is left.
	Complete bool
	// Replicas, ReadyReplicas and UpToDateReplicas are from its status.
	Replicas, ReadyReplicas, UpToDateReplicas int32
	// RolloutAfter is its spec.rollout.after: the last forced rollout.
	RolloutAfter *time.Time
	// MachinesBeforeRolloutAfter counts its machines created before
	// RolloutAfter that are not being deleted: a forced rollout is in
	// progress while it is above 0.
	MachinesBeforeRolloutAfter int32
	// MachinesCreated holds, for each of its machines not being deleted,
	// the time Cluster API compares with spec.rollout.after (its
	// MachineSet's creation time): what a forced rollout at some time
	// would replace.
	MachinesCreated []time.Time
	// TemplateName is the infrastructure template its template references.
	TemplateName string
}

// UserData is a user-data Secret, with the hashes it was made for (kept in
// its annotations, so what the machines run can always be read back).
type UserData struct {
	Name                  string
	RolloutHash           string
	RolloutWithoutVersion string
	Version               string
	// PayloadHash is the payload its rollout started with.
	PayloadHash string
	// TemplateName is the infrastructure template clone its machines use,
	// and TemplateKind its "Kind.group" ("" when made by a version that
	// did not record it).
	TemplateName string
	TemplateKind string
	Created      time.Time
	// UnreferencedSince is when the controller first found no
	// MachineDeployment, MachineSet or Machine using it (nil while one
	// does): the cleanup grace period counts from then.
	UnreferencedSince *time.Time
}

// Token is a token Secret.
type Token struct {
	Name        string
	RolloutHash string
	// PayloadHash is the payload the token serves.
	PayloadHash string
	RotatedAt   time.Time
	// FirstFetch is when a machine first fetched a payload with it.
	FirstFetch *time.Time
	Created    time.Time
}

// Node is a Node of the pool.
type Node struct {
	Name string
	// Payload is the value of its nodepool.dev/payload label.
	Payload string
	Ready   bool
}

// Plan is what the controller applies (see Reconciler.apply for the order):
// derived from Decision, which says what happens and why.
type Plan struct {
	// Decision is what the engine decided; everything below follows from it.
	Decision Decision
	// Payloads to store (create when missing; payload Secrets are immutable).
	Payloads []*payload.Payload
	// Tokens to create or update.
	Tokens []TokenAction
	// UserData to create, or to rewrite when its token rotated.
	UserData []UserDataAction
	// MachineDeployment is the template target; nil leaves the template as
	// it is (replicas, labels and taints are applied from the spec anyway).
	MachineDeployment *MachineDeploymentTarget
	// Annotations are the pool annotations to set ("" removes one).
	Annotations map[string]string
	// RecordState is what to write on the current rollout's record (the
	// one Record starts, when set): a value sets a key of RecordKeys, ""
	// removes it (record.go).
	RecordState map[string]string
	// resumed is what a resume request wrote for the record that was
	// current (record.go): it does not go on a record Record starts.
	resumed map[string]string
	// Status fields and conditions the controller writes.
	Version    string
	Updating   string
	Pending    []nodepoolv1.PendingManagementChange
	Nodes      []nodepoolv1.NodePayloadCount
	Conditions []metav1.Condition
	// Events to emit on the pool.
	Events []Event
	// Delete lists Secret names no object references any more, past the
	// grace period.
	Delete []string
	// MarkUnreferenced names user-data Secrets found unreferenced for the
	// first time (their grace period starts now); MarkReferenced those in
	// use again (the mark is cleared).
	MarkUnreferenced, MarkReferenced []string
	// NodeActions are the steps of an InPlace pool's node updates.
	NodeActions []NodeAction
	// InPlaceTarget is an InPlace pool's target user-data and
	// InPlaceToken the token Secret whose token the nodes fetch their
	// update with; UpdateInProgress is true while a Node is being updated.
	InPlaceTarget, InPlaceToken string
	UpdateInProgress            bool
	// Gates are the health gate conditions to write on machines.
	Gates []GateAction
	// Record is set when a rollout starts: the controller writes it to the
	// pool's history.
	Record *Record
	// Complete is true when the target's rollout is complete: every
	// machine runs the target, no rollout, forced or not, is in progress
	// or starting, and no halt holds. (Standing.Settled is the other
	// question: whether the pool is at rest.)
	Complete bool
	// Finish is the outcome of the rollouts on record that are still in
	// progress ("" leaves them): Complete once the pool is settled,
	// Superseded when a newer rollout starts (FinishedAt is then when).
	Finish     Outcome
	FinishedAt time.Time
	// RequeueAfter is when the engine wants to look again (token rotation,
	// pause expiry, a scheduled forced rollout, cleanup, the resync period,
	// sooner while a rollout moves); 0 means no need.
	RequeueAfter time.Duration
	// DueAfter is when something timed is due (a soak's end, a window, a
	// pause's end, a scheduled forced rollout, a token rotation, cleanup,
	// a drain's timeout, the resync period), without the poll intervals
	// RequeueAfter adds while a rollout moves: those guard against an
	// event the controller missed, so a model that misses none (a
	// forecast's) looks again at DueAfter or at the next event. 0 means
	// no need.
	DueAfter time.Duration
	// Maintenance is status.maintenance (nil without maintenance settings).
	Maintenance *nodepoolv1.MaintenanceStatus
	// Drains is status.drains: the nodes being drained and what holds them.
	Drains []nodepoolv1.NodeDrainStatus
}

// TokenAction makes a token Secret exist, serve PayloadHash, and rotate.
type TokenAction struct {
	Name        string
	RolloutHash string
	PayloadHash string
	Create      bool
	Rotate      bool
}

// UserDataAction makes a user-data Secret exist with a pointer config
// carrying the current token of TokenName.
type UserDataAction struct {
	UserData
	TokenName string
	Create    bool
}

// MachineDeploymentTarget is what the MachineDeployment's template points at.
type MachineDeploymentTarget struct {
	DataSecretName string
	Version        string
	TemplateName   string
	// TemplateKind is the clone's "Kind.group"; "" keeps the reference's.
	TemplateKind string
	// RolloutAfter, when set, is written to spec.rollout.after: Cluster API
	// replaces every machine created before it.
	RolloutAfter *time.Time
	// ClearRolloutAfter removes spec.rollout.after: a rollback returns the
	// MachineDeployment to a revision none of whose MachineSets has
	// machines left (rollbackRolloutAfter).
	ClearRolloutAfter bool
	// MaxSurge and MaxUnavailable, when set, are the rolling update's
	// limits instead of spec.management.replace.rollingUpdate's: while a
	// health gate's canary is on trial (or its rollout is halted) the
	// surge is the canary and nothing is taken down, so no machine beyond
	// the canary is made on an untested payload.
	MaxSurge, MaxUnavailable *intstr.IntOrString
	// Replicas, when set, is the MachineDeployment's spec.replicas instead
	// of Decision.Replicas: while a health gate's canary is on trial a
	// scale-up waits (holdScaleUp), since Cluster API would make every new
	// machine on the untested payload.
	Replicas *int32
	// Paused holds the MachineDeployment (Cluster API's
	// cluster.x-k8s.io/paused annotation) while a drain halts its rollout:
	// Cluster API takes no further machine down; the node draining keeps
	// being drained, with its pods.
	Paused bool
}

// Event is a Kubernetes event on the pool.
type Event struct {
	Type, Reason, Message string
}

// Initiator says who started a rollout.
type Initiator string

// Initiators of rollouts.
const (
	// InitiatorSpec is an owner change of the configuration.
	InitiatorSpec Initiator = "spec"
	// InitiatorVersion is an owner change of the release version only.
	InitiatorVersion Initiator = "version"
	// InitiatorRestart is spec.management.rolloutAfter.
	InitiatorRestart Initiator = "restart"
	// InitiatorPlatform is a platform request to apply pending drift
	// (`kubectl nodepool rollout apply-pending`).
	InitiatorPlatform Initiator = "platform"
	// InitiatorPolicy is managementUpdates: Rollout applying drift.
	InitiatorPolicy Initiator = "policy"
	// InitiatorRollback is the health gate returning a pool to the
	// previous revision after a failed rollout.
	InitiatorRollback Initiator = "rollback"
)

// Record describes a rollout that starts.
type Record struct {
	Initiator   Initiator
	RolloutHash string
	PayloadHash string
	// Changed lists the components whose digest differs from the payload
	// the machines ran before.
	Changed []string
	Started time.Time
	// ForcedAt is the time machines must be newer than, for forced rollouts.
	ForcedAt *time.Time
	// Reason says why, when the rollout needs one: the emergency path's
	// reason, or the drift deadline that was reached.
	Reason string
	// RollbackOf is, for a rollback, the rollout hash of the failed rollout.
	RollbackOf string
	// Machines, Rounds and Soak are what the rollout sets out to do: the
	// machines it replaces, in how many rounds, with the soaks its health
	// gate declares (window_fit.go); zero when they cannot be told (an
	// OnDelete pool).
	Machines, Rounds int32
	Soak             time.Duration
}

// Outcome is how a rollout on record ended.
type Outcome string

// Outcomes of rollouts on record.
const (
	OutcomeComplete   Outcome = history.OutcomeComplete
	OutcomeSuperseded Outcome = history.OutcomeSuperseded
	OutcomeFailed     Outcome = history.OutcomeFailed
)
