package scenario

import (
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// Namespace of every modelled pool.
const Namespace = "team-a"

// Defaults of the model's timing.
const (
	// DefaultBootDelay is how long a new machine takes until its node
	// registers (Ready unless its payload is bad).
	DefaultBootDelay = 3 * time.Minute
	// DefaultAgentDelay is how long an InPlace node's agent takes to apply
	// a payload it was asked for.
	DefaultAgentDelay = 2 * time.Minute
)

// World is the model: pools, fleet rollouts, a clock and the knobs.
type World struct {
	Now      time.Time
	Settings rollout.Settings
	// BootDelay and AgentDelay are the model's timings.
	BootDelay, AgentDelay time.Duration
	// Bad lists payload values ("component=value") that make a node
	// unhealthy: after the duration (0: never healthy) from its boot or
	// its in-place update.
	Bad map[string]time.Duration

	pools  []*Pool
	fleets []*Fleet
	// byRef is each pool by its namespace and name (PoolIn): a fleet
	// rollout's look at its members would otherwise search every pool
	// for each.
	byRef map[fleet.Ref]*Pool
	// queue and touched are the pools by their next event and the pools
	// watched since the last step (schedule.go); stepping is a step's.
	queue    poolQueue
	touched  []*Pool
	stepping []*Pool
	script   []Action
	// opts are the invariants a scenario opted out of, with reasons.
	opts map[string]string
	// Rows is the trace, one row per step that changed something.
	Rows  []Row
	steps int
	seq   int
	// Violations are the invariant errors found (Run stops at the first
	// unless KeepGoing).
	Violations []error
	KeepGoing  bool
	// StepLimit bounds the steps of a Run (a safety net, never reached
	// by a model that waits for events).
	StepLimit int
	// CheckForecasts turns on the invariant
	// TheForecastSaysWhenTheDriftIsApplied (forecast_invariant.go).
	CheckForecasts bool
	// Quiet keeps no trace and checks no invariant: a forecast's run,
	// which the tests check against the traced, checked one.
	Quiet bool
	// NoTrace checks every invariant but keeps no trace: a soak's run,
	// which replays a failing seed traced (a seed's world is the same
	// every time).
	NoTrace bool
	// NoPolls looks at a pool again at the engine's DueAfter, not its
	// RequeueAfter: the model misses no event, so the polls that guard a
	// controller against a missed one are steps that change nothing (a
	// forecast's run; the traced, checked worlds poll as the controller
	// does).
	NoPolls bool
	// FleetLookPerPool, when set, is how long a fleet rollout of waves
	// (no maxConcurrent) batches its pools' events a pool, at least
	// fleet.Batch and at most maxFleetLook: a forecast's run, in which a
	// fleet rollout of n pools would otherwise look at all n at every
	// second one of them changes, the square of the fleet. Its pools
	// then wait for it no longer than that at a wave's end; each pool's
	// own rollout is modelled as before.
	FleetLookPerPool time.Duration
	// Done, when set, ends Run after a step it reports true for (a
	// forecast's run, once it knows what it was run for).
	Done func(w *World) bool
	// SecretsLag, when set, is drawn after a look that rewrote a pool's
	// user-data: how long the controller's cache still shows the
	// user-data as it was (its Secret informer behind the writes made
	// after the MachineDeployment's; 0: not at all). The controller then
	// decides nothing and looks again a second later (its check of its
	// own writes), for at most ownWritesLimit.
	SecretsLag func() time.Duration
	// CrashAfterMachineDeployment stops the controller in the next look
	// that changes a MachineDeployment's user-data or rollout.after, right
	// after that write (a crash, or an API error that ends the reconcile):
	// the record, tokens and new user-data are written, the rest is not;
	// the controller then restarts.
	CrashAfterMachineDeployment bool
	// DecideOnLaggingSecrets models a controller without that check: a
	// look behind its own writes decides on the user-data as it was. Only
	// for the test that shows the engine holds even then.
	DecideOnLaggingSecrets bool
	notes                  []string
}

// New is an empty world at start.
func New(start time.Time) *World {
	return &World{
		Now:        start.UTC(),
		Settings:   rollout.Settings{TokenTTL: 24 * time.Hour, CleanupGracePeriod: 10 * time.Minute, NodeAgentTimeout: time.Hour, ResyncPeriod: 10 * time.Hour},
		BootDelay:  DefaultBootDelay,
		AgentDelay: DefaultAgentDelay,
		Bad:        map[string]time.Duration{},
		opts:       map[string]string{},
		StepLimit:  200000,
	}
}

// Pool is one modelled pool: its NodePool object, its Secrets and stored
// payloads, its MachineDeployment (Replace) or MachineSet (InPlace) with
// machines, its history, and the platform's inputs for it.
type Pool struct {
	// actions counts the scripted actions run that name the pool or no
	// pool (the platform's, a controller restart): a forecast is checked
	// only while none ran (forecast_invariant.go).
	actions int
	w       *World
	Name    string
	// Obj is the NodePool: spec as the owner wrote it, annotations and
	// status as the controller (and people) wrote them.
	Obj *nodepoolv1.NodePool
	// nodesUnread makes its next reconcile unable to read its Cluster's
	// Nodes (a controller restart: the connection is not up yet).
	nodesUnread bool
	// Inputs is what its payload renders from.
	Inputs Inputs

	UserData map[string]rollout.UserData
	Tokens   map[string]rollout.Token
	Payloads map[string]*payload.Payload
	// staleUserData is its user-data as the controller's cache shows it
	// until staleUntil, behind a rewrite the controller made at
	// staleSince (nil once the cache caught up).
	staleUserData          map[string]rollout.UserData
	staleSince, staleUntil time.Time

	// MD is the MachineDeployment (Replace pools), nil until created.
	MD *MachineDeployment
	// MS is the InPlace MachineSet (InPlace pools), nil until created.
	MS       *InPlaceSet
	Machines []*Machine
	History  []Record
	// DrainBlocked is the drain knob: while it is set, a PodDisruptionBudget
	// allows no eviction from the pool's nodes, so a machine Cluster API
	// deletes stays Draining (Draining), and an InPlace node's drain has a
	// pod left (drain_model.go).
	DrainBlocked bool
	// Draining are the deleting machines whose node Cluster API drains.
	Draining []*Machine
	// Events are the events the controller emitted for the pool, in order.
	Events []rollout.Event
	// Past are finished rollouts from before the model (newest first), as
	// the pool's history records them: the prediction of its rollout
	// durations reads them after the model's own records.
	Past []poolmath.PastRollout
	// BootDelay is how long its machines take until their node registers
	// (0: the world's BootDelay); AgentDelay how long its node agent takes
	// to apply a payload in place (0: the world's AgentDelay).
	BootDelay, AgentDelay time.Duration

	// memory the controller keeps between reconciles (none the engine
	// needs): the last plan, for the trace. Restart drops it.
	lastPlan *rollout.Plan
	// stepAction is the first action other than None of this step.
	stepAction rollout.Action
	// the render cache.
	rendered       *payload.Payload
	renderedHashes payload.Hashes
	renderedKey    string
	// due is when the controller looks at the pool again; looks counts
	// its reconciles.
	due   time.Time
	looks int
	// watch is set when something the controller watches changed.
	watch bool
	// at is the time of the pool's own next event (nextAt): a step runs
	// Cluster API, the agents and the MachineHealthCheck of the pools
	// whose event is due or that are watched, so a world of many pools
	// steps each at its own events, not at every pool's. stepped marks a
	// pool the step ran.
	at      time.Time
	stepped bool
	// qi is its index in the world's queue (-1: not in it).
	qi int

	// ClusterPaused is the pool's Cluster paused (spec.paused, as
	// clusterctl move sets it while it moves the cluster): neither the
	// controller nor Cluster API's controllers write anything for the
	// pool; machines already made go on booting.
	ClusterPaused bool

	// track is what the invariants remember (not the controller).
	track tracker
}

// MachineDeployment is the model of Cluster API's MachineDeployment.
type MachineDeployment struct {
	DataSecretName, Version, TemplateName string
	Replicas                              int32
	RolloutAfter                          *time.Time
	MaxSurge, MaxUnavailable              intstr.IntOrString
	OnDelete                              bool
	// Paused is Cluster API's cluster.x-k8s.io/paused annotation: the
	// MachineDeployment's rollout planner does nothing.
	Paused bool
	// Gated: the machine template lists the nodepool.dev/Healthy
	// readiness gate.
	Gated bool
	Sets  []*MachineSet
}

// MachineSet is one MachineSet of a MachineDeployment.
type MachineSet struct {
	Name                                  string
	Created                               time.Time
	DataSecretName, Version, TemplateName string
	Replicas                              int32
}

// InPlaceSet is an InPlace pool's MachineSet.
type InPlaceSet struct {
	DataSecretName, Version, TemplateName string
	Replicas                              int32
	RolloutAfter                          *time.Time
	Created                               time.Time
}

// Machine is a Machine with its Node.
type Machine struct {
	Name    string
	Set     string
	Created time.Time
	// DataSecretName and Version are its bootstrap data and version
	// (InPlace: the controller's record of what it runs).
	DataSecretName, Version string
	// Payload is what its node booted (or was updated to in place).
	Payload string
	// NodeAt is when its node registers.
	NodeAt time.Time
	// Gate is its nodepool.dev/Healthy condition.
	Gate *rollout.Gate
	// UnhealthyAt is when its node turns NotReady (zero: never).
	UnhealthyAt time.Time
	// ReadySince is when its node became Ready (zero: not Ready).
	ReadySince time.Time
	// Cause is why it was deleted ("" while it lives).
	Cause string
	// InPlace node state.
	UpdatedAt                       time.Time
	Phase, Desired, Current, State  string
	StartedAt, RequestedAt, AgentAt time.Time
	Unschedulable, WasUnschedulable bool
	// ReadyAtStart: its node was Ready when its in-place update started.
	ReadyAtStart bool
	// DrainSince is when Cluster API started draining its node (it is
	// deleting and in Pool.Draining).
	DrainSince time.Time
}

// Record is a history record (a ControllerRevision) of the pool.
type Record struct {
	Revision int64
	rollout.Record
	Outcome   string
	Completed *time.Time
	// State is what the engine keeps on the record (rollout.RecordKeys),
	// as the ControllerRevision's annotations hold it.
	State map[string]string
}

// HasNode reports whether the machine's node has registered.
func (m *Machine) HasNode(now time.Time) bool { return !m.NodeAt.IsZero() && !now.Before(m.NodeAt) }

// NodeReady reports whether its node is Ready now.
func (m *Machine) NodeReady(now time.Time) bool {
	return m.HasNode(now) && (m.UnhealthyAt.IsZero() || now.Before(m.UnhealthyAt))
}

// PoolSpec is what AddPool starts a pool with.
type PoolSpec struct {
	Name string
	// Namespace is the pool's namespace (default Namespace).
	Namespace string
	Replicas  int32
	Config    string
	Version   string
	// Platform values (CompRenderer, CompProxyDefaults, CompPullSecret).
	Platform map[inputs.Component]string
	// Edit changes the NodePool's spec before the pool is added.
	Edit func(*nodepoolv1.NodePool)
}

// AddPool adds a pool; the first step creates its MachineDeployment.
func (w *World) AddPool(s PoolSpec) *Pool {
	if s.Config == "" {
		s.Config = "c1"
	}
	if s.Version == "" {
		s.Version = "v1.36.3"
	}
	plat := map[inputs.Component]string{CompRenderer: "r1", CompProxyDefaults: "p1", CompPullSecret: "s1"}
	for k, v := range s.Platform {
		plat[k] = v
	}
	obj := &nodepoolv1.NodePool{}
	if s.Namespace == "" {
		s.Namespace = Namespace
	}
	obj.Name, obj.Namespace, obj.Generation = s.Name, s.Namespace, 1
	obj.CreationTimestamp = metav1.NewTime(w.Now)
	obj.Labels = map[string]string{"fleet": "all"}
	obj.Spec.ClusterName = "c"
	obj.Spec.Replicas = &s.Replicas
	obj.Spec.Release.Version = s.Version
	obj.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "DockerMachineTemplate", APIGroup: "infrastructure.cluster.x-k8s.io", Name: "tmpl"}
	if s.Edit != nil {
		s.Edit(obj)
	}
	p := &Pool{w: w, Name: s.Name, Obj: obj, Inputs: Inputs{Config: s.Config, Version: s.Version, Platform: plat},
		UserData: map[string]rollout.UserData{}, Tokens: map[string]rollout.Token{}, Payloads: map[string]*payload.Payload{},
		due: w.Now, qi: -1}
	p.track.init()
	p.touch()
	// Kept by namespace and name: inserted in place, as a sort after each
	// of a forecast's thousands of pools would be the square of them.
	at := sort.Search(len(w.pools), func(i int) bool { return w.pools[i].order(p) > 0 })
	w.pools = slices.Insert(w.pools, at, p)
	ref := fleet.Ref{Namespace: obj.Namespace, Name: obj.Name}
	if w.byRef == nil {
		w.byRef = map[fleet.Ref]*Pool{}
	}
	if _, ok := w.byRef[ref]; !ok {
		w.byRef[ref] = p
	}
	return p
}

// Pool returns the pool of that name (nil when none); the first by
// namespace when pools of several namespaces share it.
func (w *World) Pool(name string) *Pool {
	for _, p := range w.pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// PoolIn returns the pool of that namespace and name (nil when none).
func (w *World) PoolIn(namespace, name string) *Pool {
	return w.byRef[fleet.Ref{Namespace: namespace, Name: name}]
}

// Pools are the world's pools, by name.
func (w *World) Pools() []*Pool { return append([]*Pool(nil), w.pools...) }

// OptOut exempts the world from an invariant, with the reason why.
func (w *World) OptOut(invariant, reason string) {
	if reason == "" {
		panic("scenario: opting out of " + invariant + " needs a reason")
	}
	w.opts[invariant] = reason
}

// Note adds a line to the next trace row's "what happened".
func (w *World) Note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

func (w *World) name(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-%d", prefix, w.seq)
}

// InPlace reports whether the pool updates its machines in place.
func (p *Pool) InPlace() bool {
	return p.Obj.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace
}

// Live are the pool's machines, oldest first.
func (p *Pool) Live() []*Machine { return append([]*Machine(nil), p.Machines...) }

// LastPlan is the plan of the pool's last reconcile (nil before one, or
// after a controller restart).
func (p *Pool) LastPlan() *rollout.Plan { return p.lastPlan }

// Annotation is a pool annotation ("" when unset).
func (p *Pool) Annotation(k string) string { return p.Obj.Annotations[k] }

// Recorded is what the pool's current rollout record keeps under k
// (rollout.RecordKeys), "" when it has no record.
func (p *Pool) Recorded(k string) string {
	if n := len(p.History); n > 0 {
		return p.History[n-1].State[k]
	}
	return ""
}

// AsAnOlderNodepoolWroteIt moves what the current rollout's record keeps
// (rollout.RecordKeys) onto the pool's annotations, where a nodepool
// before rollout records kept it: the state an upgrade starts from.
func (p *Pool) AsAnOlderNodepoolWroteIt() {
	n := len(p.History)
	if n == 0 {
		return
	}
	for k, v := range p.History[n-1].State {
		p.setAnnotation(k, v)
	}
	p.History[n-1].State = nil
}

// current is the engine's view of the pool's current rollout record.
func (p *Pool) current() *rollout.CurrentRollout {
	n := len(p.History)
	if n == 0 {
		return nil
	}
	r := p.History[n-1]
	c := &rollout.CurrentRollout{Revision: r.Revision, State: map[string]string{}, RolloutHash: r.RolloutHash, Started: r.Started,
		InProgress: r.Outcome == OutcomeInProgress, Forced: r.ForcedAt != nil, ForcedAt: r.ForcedAt}
	for k, v := range r.State {
		c.State[k] = v
	}
	return c
}

func (p *Pool) setAnnotation(k, v string) {
	if p.Obj.Annotations == nil {
		p.Obj.Annotations = map[string]string{}
	}
	if v == "" {
		delete(p.Obj.Annotations, k)
		return
	}
	p.Obj.Annotations[k] = v
}

// Latest renders the pool's latest payload (through the controller's
// render cache, which a restart drops).
func (p *Pool) Latest() (*payload.Payload, payload.Hashes) {
	key := fmt.Sprint(p.Inputs.Config, "|", p.Inputs.Version, "|", p.Inputs.Platform[CompRenderer], "|", p.Inputs.Platform[CompProxyDefaults], "|", p.Inputs.Platform[CompPullSecret])
	if p.rendered == nil || p.renderedKey != key {
		pl, h := render(p.Name, p.Inputs)
		p.rendered, p.renderedHashes, p.renderedKey = pl, h, key
	}
	return p.rendered, p.renderedHashes
}
