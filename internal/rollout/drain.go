package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// NodeDrain is one node being drained, as observed: the node of a Machine
// Cluster API deletes (Replace), or an InPlace node in its Draining phase.
type NodeDrain struct {
	Machine, Node string
	// Since is when the drain started.
	Since time.Time
	// Message is what the drain reports: Cluster API's Machine Deleting
	// condition, or the refused evictions of an InPlace drain.
	Message string
	// Pods are the pods that hold the node and why (DrainBlockers).
	Pods []nodepoolv1.DrainBlocker
	// UpToDate is true when the machine runs the MachineDeployment's
	// template: its drain belongs to no rollout (a scale-down, a
	// MachineHealthCheck repair, a person's delete), so it never halts
	// the pool.
	UpToDate bool
}

// DrainState is where the pool's drains stand against its drain policy.
type DrainState struct {
	Policy poolmath.DrainPolicy
	// Nodes are the drains in progress, by node; Blocked those that have
	// lasted the policy's timeout with pods left.
	Nodes   []NodeDrain
	Blocked map[string]bool
	// Halt is, with onTimeout Halt, the drain that halted the target's
	// rollout (now or earlier, AnnotationDrainHalted), nil otherwise.
	Halt *NodeDrain
	// record is the halt to write on the pool when it is new.
	record string
	// next is when a drain in progress reaches its timeout.
	next time.Time
}

// drainResumed ends the value of AnnotationDrainHalted once a person
// resumed the rollout.
const drainResumed = "/resumed"

// decideDrain weighs the pool's drains against its policy (poolmath.Drain):
// a drain lasting the timeout with pods left is blocked; with Halt the
// first blocked one halts the target's rollout, which holds while the
// target is that rollout, until a person resumes it (Resume).
//
// The drain of an up-to-date machine (a scale-down, a MachineHealthCheck
// repair, a person's delete) belongs to no rollout: it is reported
// (status.drains, DrainBlocked) and forced at the timeout with Force, but
// never halts or pauses the pool (with Halt it waits, as with Wait).
func decideDrain(in Input, target *UserData) *DrainState {
	ds := &DrainState{Policy: poolmath.Drain(in.Pool), Blocked: map[string]bool{}}
	ds.Nodes = append(ds.Nodes, in.Drains...)
	if ip := in.InPlace; ip != nil {
		for _, m := range ip.Machines {
			if m.Phase != nodepoolv1.UpdatePhaseDraining || m.PodsLeft == 0 {
				continue
			}
			d := NodeDrain{Machine: m.Machine, Node: m.Node, Since: m.StartedAt, Message: m.DrainBlocked, UpToDate: inPlaceUpToDate(in, m, target)}
			if d.Message == "" {
				d.Message = fmt.Sprintf("%d pods left to evict", m.PodsLeft)
			}
			d.Pods = DrainBlockers(m.DrainBlocked)
			ds.Nodes = append(ds.Nodes, d)
		}
	}
	sort.Slice(ds.Nodes, func(i, j int) bool { return ds.Nodes[i].Node < ds.Nodes[j].Node })
	for _, d := range ds.Nodes {
		ends := d.Since.Add(ds.Policy.Timeout)
		if !in.Now.Before(ends) {
			ds.Blocked[d.Node] = true
			if ds.Policy.OnTimeout == nodepoolv1.DrainHalt && ds.Halt == nil && !d.UpToDate {
				d := d
				ds.Halt = &d
			}
		} else if ds.next.IsZero() || ends.Before(ds.next) {
			ds.next = ends
		}
	}
	if target == nil {
		ds.Halt = nil
		return ds
	}
	onRecord := recorded(in, nodepoolv1.AnnotationDrainHalted)
	held, machine, _ := strings.Cut(strings.TrimSuffix(onRecord, drainResumed), "/")
	if held == target.RolloutHash && strings.HasSuffix(onRecord, drainResumed) {
		// Resumed: that machine's drain halts nothing any more; another
		// blocked drain may.
		ds.Halt = nil
		for _, d := range ds.Nodes {
			if ds.Blocked[d.Node] && d.Machine != machine && ds.Policy.OnTimeout == nodepoolv1.DrainHalt && !d.UpToDate {
				d := d
				ds.Halt = &d
				break
			}
		}
		held = ""
	}
	switch {
	case held == target.RolloutHash && held != "":
		if ds.Halt == nil || ds.Halt.Machine != machine {
			h := NodeDrain{Machine: machine}
			for _, d := range ds.Nodes {
				if d.Machine == machine {
					h = d
				}
			}
			ds.Halt = &h
		}
	case ds.Halt != nil:
		ds.record = target.RolloutHash + "/" + ds.Halt.Machine
	}
	return ds
}

// inPlaceUpToDate reports whether an InPlace machine runs the target's
// rollout (its configuration, whatever platform payload) and was updated
// since the last forced rollout: its drain, begun for a rollout the
// target superseded (an undo), belongs to no rollout.
func inPlaceUpToDate(in Input, m InPlaceMachine, target *UserData) bool {
	if target == nil {
		return false
	}
	ud, ok := in.UserData[m.DataSecretName]
	if !ok || ud.RolloutHash != target.RolloutHash || m.Version != target.Version {
		return false
	}
	forcedAt := rolloutAfterCome(in) // health_inplace.go
	return forcedAt == nil || !m.UpdatedAt.Before(*forcedAt)
}

// drainHaltHolds reports whether a drain halt of target's rollout is
// recorded and not resumed: it holds the forced rollouts of that target
// as a health-gate halt does, until a resume or an owner change.
func drainHaltHolds(in Input, target *UserData) bool {
	onRecord := recorded(in, nodepoolv1.AnnotationDrainHalted)
	if target == nil || onRecord == "" || strings.HasSuffix(onRecord, drainResumed) {
		return false
	}
	held, _, _ := strings.Cut(onRecord, "/")
	return held == target.RolloutHash
}

// planDrain reports the drains (status.drains), warns once when a drain
// is blocked, and carries out a drain halt: kept on the rollout's record,
// RolloutHealthy False (as a failed health gate says it, so a fleet
// rollout counts the pool failed) and the MachineDeployment paused so
// Cluster API takes no further machine down; InPlace pools stop in
// planInPlace.
func planDrain(in Input, ds *DrainState, p *Plan) {
	if ds == nil {
		return
	}
	was := map[string]nodepoolv1.NodeDrainStatus{}
	for _, s := range in.Pool.Status.Drains {
		was[s.Node] = s
	}
	for _, d := range ds.Nodes {
		st := nodepoolv1.NodeDrainStatus{Node: d.Node, Machine: d.Machine, Since: metav1.NewTime(d.Since), Blocked: ds.Blocked[d.Node],
			Pods: d.Pods, Message: truncate(d.Message, 2048)}
		if len(st.Pods) > 10 {
			st.Pods = st.Pods[:10]
		}
		p.Drains = append(p.Drains, st)
		if st.Blocked && !was[d.Node].Blocked {
			p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventDrainBlocked, Message: blockedMessage(d, ds.Policy)})
		}
	}
	if len(p.Drains) > 100 {
		p.Drains = p.Drains[:100]
	}
	saidForced(in, ds, p)
	if ds.Halt == nil {
		return
	}
	if ds.record != "" {
		p.record(nodepoolv1.AnnotationDrainHalted, ds.record)
	}
	msg := haltMessage(*ds.Halt, ds.Policy)
	c := metav1.Condition{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonDrainHalted, Message: msg}
	if prev := meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); prev != nil && prev.Reason == c.Reason && ds.record == "" {
		c.Message = prev.Message // said once: the pods named when it halted
	}
	replaced := false
	for i := range p.Conditions {
		if p.Conditions[i].Type == c.Type {
			p.Conditions[i], replaced = c, true
		}
	}
	if !replaced {
		p.Conditions = append(p.Conditions, c)
	}
	if ds.record != "" {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.ReasonDrainHalted, Message: msg})
	}
	if p.MachineDeployment != nil && in.InPlace == nil && in.Pool.Spec.Management.UpgradeType != nodepoolv1.UpgradeTypeInPlace {
		p.MachineDeployment.Paused = true
	}
}

// saidForced warns of the drains Cluster API forced before the controller
// looked again: its nodeDrainTimeout is the Force policy's timeout, so it
// may delete the machine at the moment the drain becomes blocked. A drain
// on record, not yet said blocked, still held by pods when last seen, and
// gone once its timeout passed, was forced: it is said as a blocked one
// is, once (it leaves status.drains with this plan).
func saidForced(in Input, ds *DrainState, p *Plan) {
	if ds.Policy.OnTimeout != nodepoolv1.DrainForce {
		return
	}
	now := map[string]bool{}
	for _, d := range ds.Nodes {
		now[d.Node] = true
	}
	for _, s := range in.Pool.Status.Drains {
		if now[s.Node] || s.Blocked || len(s.Pods) == 0 || in.Now.Before(s.Since.Add(ds.Policy.Timeout)) {
			continue
		}
		d := NodeDrain{Machine: s.Machine, Node: s.Node, Since: s.Since.Time, Message: s.Message, Pods: s.Pods}
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventDrainBlocked, Message: blockedMessage(d, ds.Policy)})
	}
}

// requeueDrain looks again when a drain in progress reaches its timeout.
func requeueDrain(in Input, ds *DrainState, p *Plan) {
	if ds != nil && ds.next.After(in.Now) {
		p.RequeueAfter = minPositive(p.RequeueAfter, ds.next.Sub(in.Now)+time.Second)
		p.DueAfter = minPositive(p.DueAfter, ds.next.Sub(in.Now)+time.Second)
	}
}

// blockedMessage says which node a drain holds, for how long and by what.
func blockedMessage(d NodeDrain, pol poolmath.DrainPolicy) string {
	then := map[nodepoolv1.DrainTimeoutPolicy]string{
		nodepoolv1.DrainWait:  "waiting for them (onTimeout Wait)",
		nodepoolv1.DrainForce: "forcing it (onTimeout Force)",
		nodepoolv1.DrainHalt:  "halting the rollout (onTimeout Halt)",
	}[pol.OnTimeout]
	return fmt.Sprintf("node %s (machine %s) has drained for %s with pods left: %s; %s", d.Node, d.Machine, pol.Timeout, blockersText(d), then)
}

func haltMessage(d NodeDrain, pol poolmath.DrainPolicy) string {
	return fmt.Sprintf("rollout halted: node %s (machine %s) did not drain within %s: %s; the node and its pods are kept and no further machine is updated until the pool changes or the rollout is resumed",
		orDefault(d.Node, "of machine "+d.Machine), d.Machine, pol.Timeout, blockersText(d))
}

func blockersText(d NodeDrain) string {
	if len(d.Pods) == 0 {
		return orDefault(d.Message, "pods left")
	}
	var out []string
	for _, b := range d.Pods {
		s := "pod " + b.Pod
		if b.Budget != "" {
			s += " (PodDisruptionBudget " + b.Budget + ")"
		}
		if b.Reason != "" {
			s += ": " + b.Reason
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
