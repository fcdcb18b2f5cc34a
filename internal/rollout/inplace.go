package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// InPlace is what the engine sees of an InPlace pool's machines and Nodes.
// The pool's MachineSet is summarised in Input.MachineDeployment like a
// Replace pool's MachineDeployment: its template is the target, and its
// machines are up to date once their nodes finished the update.
type InPlace struct {
	Machines []InPlaceMachine
	// MaxUnavailable is spec.management.inPlace.maxUnavailable resolved
	// against the desired replicas (at least 1).
	MaxUnavailable int32
	// DrainTimeout is how long a node drains before it is updated anyway
	// (poolmath.DrainPolicy.ForceAfter: spec.management.drain with Force,
	// or spec.nodeDrainTimeout); 0 waits for the drain forever.
	DrainTimeout time.Duration
}

// InPlaceMachine is one machine of an InPlace pool and its Node.
type InPlaceMachine struct {
	// Machine is the Machine's name.
	Machine string
	// DataSecretName and Version are what the machine runs: its Machine's
	// user-data annotation (AnnotationMachineUserData) and spec.version,
	// advanced by the controller when its node finishes an update.
	DataSecretName string
	Version        string
	// UpdatedAt is when its node last finished an in-place update, or when
	// the Machine was created.
	UpdatedAt time.Time
	// Node is its Node's name, "" while it has none (booting) or the
	// workload cluster cannot be read.
	Node string
	// Unschedulable is the Node's spec.unschedulable.
	Unschedulable bool
	// Phase, StartedAt and WasUnschedulable are the controller's progress
	// with the Node (AnnotationUpdatePhase and friends).
	Phase     string
	StartedAt time.Time
	// RequestedAt is when the controller last asked the agent for a payload.
	RequestedAt      time.Time
	WasUnschedulable bool
	// Desired, Current, State and Message are the node update protocol's
	// annotations.
	Desired, Current, State, Message string
	// PodsLeft is how many pods a drain still has to evict from the Node
	// (read while it drains, those being evicted included); DrainBlocked
	// says why the last eviction was refused (a PodDisruptionBudget), ""
	// if none was.
	PodsLeft     int
	DrainBlocked string
}

// NodeStep is what the controller does to one Node of an InPlace pool.
type NodeStep string

const (
	// StepStart cordons the Node and starts draining it.
	StepStart NodeStep = "Start"
	// StepDrain evicts the pods still on a draining Node.
	StepDrain NodeStep = "Drain"
	// StepRequest asks the node's agent for a payload (the Node is drained).
	StepRequest NodeStep = "Request"
	// StepFinish records the machine as updated, then uncordons the Node.
	StepFinish NodeStep = "Finish"
)

// NodeAction is one step on one machine's Node.
type NodeAction struct {
	Step    NodeStep
	Machine string
	Node    string
	// Payload is the payload hash asked for (StepRequest).
	Payload string
	// DataSecretName and Version are written to the Machine (StepFinish).
	DataSecretName, Version string
	// Uncordon is false when the Node was cordoned before the update.
	Uncordon bool
	// Cordoned says the Node is unschedulable already (StepStart).
	Cordoned bool
}

// planInPlace moves the nodes of an InPlace pool towards the target, never
// more than MaxUnavailable at once: each due node is cordoned and drained,
// asked for the target's payload, and, once its agent reports Done on it,
// recorded as updated and uncordoned. A node is due when its machine runs
// other user-data than the target, or was updated before a forced
// rollout's time. A Degraded node stops the update: nothing else starts or
// advances until it recovers. It also explains what holds the update on
// the pool's updating conditions (the returned hold).
func planInPlace(in Input, target *UserData, p *Plan) inPlaceHold {
	ip := in.InPlace
	if ip == nil || target == nil {
		return inPlaceHold{}
	}
	p.InPlaceTarget, p.InPlaceToken = target.Name, secrets.TokenSecretName(in.Pool.Name, target.RolloutHash)
	want := target.PayloadHash
	for _, t := range p.Tokens {
		if t.RolloutHash == target.RolloutHash {
			want = t.PayloadHash
		}
	}
	var forcedAt *time.Time
	if p.MachineDeployment != nil && p.MachineDeployment.RolloutAfter != nil && !p.MachineDeployment.RolloutAfter.After(in.Now) {
		forcedAt = p.MachineDeployment.RolloutAfter
	}
	machines := append([]InPlaceMachine(nil), ip.Machines...)
	sort.Slice(machines, func(i, j int) bool { return machines[i].Machine < machines[j].Machine })

	var degraded, blocked, waiting []string
	busy := int32(0)
	for _, m := range machines {
		if m.Phase == "" {
			continue
		}
		busy++
		if m.Phase == nodepoolv1.UpdatePhaseUpdating && m.State == nodepoolv1.UpdateStateDegraded {
			degraded = append(degraded, fmt.Sprintf("node %s: %s", m.Node, orDefault(m.Message, "the node agent reports Degraded")))
		} else if agentSilent(in, m) {
			// It keeps its slot (it stays cordoned) and stops the rest:
			// a node that never answers must not free capacity for more.
			degraded = append(degraded, fmt.Sprintf("node %s: its node agent has not finished the update within %s (state %q): check the agent, or change the pool to retry",
				m.Node, in.Settings.NodeAgentTimeout, orDefault(m.State, "none")))
		}
	}
	if dh := p.Decision.Drain; dh != nil && dh.Halt != nil {
		// A drain halt keeps the node and its pods: no more evictions,
		// nothing else starts or advances.
		degraded = append(degraded, haltMessage(*dh.Halt, dh.Policy))
	}
	soaking, halt := inPlaceHealthHold(p.Decision.Health) // health_inplace.go
	busy += soaking
	if halt != "" {
		degraded = append(degraded, halt)
	}
	halted := len(degraded) > 0
	// Nodes unavailable for another reason (NotReady, or cordoned by
	// someone else) use up maxUnavailable too: an update never takes more
	// capacity away than the owner allowed.
	ready := map[string]bool{}
	for _, n := range in.Nodes {
		ready[n.Name] = n.Ready
	}
	isUnavailable := func(m InPlaceMachine) bool {
		r, known := ready[m.Node]
		return m.Phase == "" && m.Node != "" && (m.Unschedulable || (known && !r))
	}
	var unavailable int32
	for _, m := range machines {
		if isUnavailable(m) {
			unavailable++
		}
	}
	for _, m := range machines {
		switch m.Phase {
		case nodepoolv1.UpdatePhaseDraining:
			if !due(m, target, forcedAt) {
				// The rollout it drained for was superseded by what the
				// node runs (an undo): nothing to update, the node returns.
				busy--
				p.NodeActions = append(p.NodeActions, NodeAction{Step: StepFinish, Machine: m.Machine, Node: m.Node,
					DataSecretName: target.Name, Version: target.Version, Uncordon: !m.WasUnschedulable})
				p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventNodeUpdated,
					Message: fmt.Sprintf("node %s runs %s already; its drain is stopped and it is uncordoned (machine %s)", m.Node, target.Name, m.Machine)})
				continue
			}
			if halted {
				continue
			}
			drained := m.PodsLeft == 0
			timedOut := ip.DrainTimeout > 0 && !in.Now.Before(m.StartedAt.Add(ip.DrainTimeout))
			if !drained && !timedOut {
				why := fmt.Sprintf("node %s: draining, %d pods left to evict", m.Node, m.PodsLeft)
				if m.DrainBlocked != "" {
					why = fmt.Sprintf("node %s: draining, %s", m.Node, m.DrainBlocked)
				}
				blocked = append(blocked, why)
				p.NodeActions = append(p.NodeActions, NodeAction{Step: StepDrain, Machine: m.Machine, Node: m.Node})
				continue
			}
			if !drained {
				p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventDrainTimedOut,
					Message: fmt.Sprintf("node %s still has %d pods after the drain timeout %s; updating it anyway", m.Node, m.PodsLeft, ip.DrainTimeout)})
			}
			p.NodeActions = append(p.NodeActions, NodeAction{Step: StepRequest, Machine: m.Machine, Node: m.Node, Payload: want})
		case nodepoolv1.UpdatePhaseUpdating:
			switch {
			case m.Desired != want && (!halted || m.State == nodepoolv1.UpdateStateDegraded):
				// The target's payload moved (a new target or a forced
				// rollout): ask for the one the pool serves now. A new
				// target is also how an owner fixes a Degraded node.
				p.NodeActions = append(p.NodeActions, NodeAction{Step: StepRequest, Machine: m.Machine, Node: m.Node, Payload: want})
			case m.Desired == want && m.Current == want && m.State == nodepoolv1.UpdateStateDone:
				if !soaksAfterFinish(p.Decision.Health) { // health_inplace.go: it soaks first
					busy-- // uncordoned before any Start of this plan is applied
				}
				p.NodeActions = append(p.NodeActions, NodeAction{Step: StepFinish, Machine: m.Machine, Node: m.Node,
					DataSecretName: target.Name, Version: target.Version, Uncordon: !m.WasUnschedulable})
				p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventNodeUpdated,
					Message: fmt.Sprintf("node %s runs payload %s in place (machine %s)", m.Node, payload.Short(want), m.Machine)})
			case m.State != nodepoolv1.UpdateStateDegraded:
				waiting = append(waiting, fmt.Sprintf("node %s: %s", m.Node, orDefault(m.State, "waiting for its agent")))
			}
		}
	}
	if !halted {
		full := false
		for _, m := range machines {
			if m.Phase != "" || m.Node == "" || !due(m, target, forcedAt) {
				continue
			}
			// A node that is unavailable already loses nothing more by
			// its update: it takes its own slot.
			already := isUnavailable(m)
			if !already && poolmath.InPlaceStarts(ip.MaxUnavailable, busy, unavailable) == 0 {
				full = true
				continue
			}
			busy++
			if already {
				unavailable--
			}
			p.NodeActions = append(p.NodeActions, NodeAction{Step: StepStart, Machine: m.Machine, Node: m.Node, Cordoned: m.Unschedulable})
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventUpdatingNode,
				Message: fmt.Sprintf("cordoning and draining node %s to update it in place to %s", m.Node, target.Name)})
		}
		if full && busy == 0 && unavailable > 0 {
			waiting = append(waiting, fmt.Sprintf("%d nodes already unavailable (NotReady or cordoned) use up maxUnavailable %d", unavailable, ip.MaxUnavailable))
		}
	}
	p.UpdateInProgress = busy > 0
	return holdOf(degraded, blocked, waiting)
}

// agentSilent reports whether a node's agent has been asked for a payload
// longer than the node agent timeout ago without answering Done.
func agentSilent(in Input, m InPlaceMachine) bool {
	return m.Phase == nodepoolv1.UpdatePhaseUpdating && in.Settings.NodeAgentTimeout > 0 && !m.RequestedAt.IsZero() &&
		m.State != nodepoolv1.UpdateStateDone && !in.Now.Before(m.RequestedAt.Add(in.Settings.NodeAgentTimeout))
}

// due reports whether a machine's node needs an in-place update.
func due(m InPlaceMachine, target *UserData, forcedAt *time.Time) bool {
	return m.DataSecretName != target.Name || m.Version != target.Version || (forcedAt != nil && m.UpdatedAt.Before(*forcedAt))
}

// inPlaceHold is what holds an InPlace update: a reason for the updating
// conditions ("" keeps theirs) and what to add to their message.
type inPlaceHold struct {
	reason, text string
}

// holdOf says what holds the update: a Degraded node stops it; a blocked
// drain holds it; nodes waiting for their agent are listed.
func holdOf(degraded, blocked, waiting []string) inPlaceHold {
	var h inPlaceHold
	var parts []string
	switch {
	case len(degraded) > 0:
		h.reason = nodepoolv1.ReasonNodeUpdateDegraded
		parts = append(parts, "the update is stopped: "+strings.Join(degraded, "; ")+"; no other node is touched until it recovers")
	case len(blocked) > 0:
		h.reason = nodepoolv1.ReasonDrainBlocked
		parts = append(parts, strings.Join(blocked, "; "))
	}
	if len(waiting) > 0 && len(degraded) == 0 {
		parts = append(parts, strings.Join(waiting, "; "))
	}
	h.text = strings.Join(parts, "; ")
	return h
}

// explain adds the hold to an updating condition that says a rollout is
// in progress.
func (h inPlaceHold) explain(c *metav1.Condition) {
	if h.text == "" || c.Status != metav1.ConditionTrue {
		return
	}
	c.Message += " in place: " + h.text
	if h.reason != "" {
		c.Reason = h.reason
	}
}
