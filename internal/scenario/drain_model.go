package scenario

import (
	"fmt"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// GuardedBudget is the PodDisruptionBudget of the drain knob: while
// Pool.DrainBlocked is set it allows no eviction of each node's guarded pod.
const GuardedBudget = "guarded"

// guardedPod is the pod of m's node the budget guards.
func guardedPod(m *Machine) string { return "apps/" + m.Name + "-guarded" }

// drainHolds models Cluster API's drain of a machine it deletes: with the
// drain knob set, a machine whose node registered stays, deleting, in
// Pool.Draining (still counted in its MachineSet's replicas: setMachines)
// until the knob is cleared or
// the drain policy forces it (finishDrains). It reports whether it held m.
func (p *Pool) drainHolds(m *Machine, cause string) bool {
	if !p.DrainBlocked || p.InPlace() || !m.HasNode(p.w.Now) || !m.DrainSince.IsZero() || cause == CauseRepair {
		return false
	}
	keep := p.Machines[:0]
	for _, x := range p.Machines {
		if x != m {
			keep = append(keep, x)
		}
	}
	p.Machines = keep
	m.DrainSince, m.Cause = p.w.Now, cause
	p.Draining = append(p.Draining, m)
	p.w.Note("%s draining: PodDisruptionBudget %s refuses evicting %s", m.Name, GuardedBudget, guardedPod(m))
	return true
}

// finishDrains deletes the draining machines whose drain ends: the knob
// cleared, or Cluster API's nodeDrainTimeout (the Force policy's timeout)
// passed.
func (p *Pool) finishDrains() bool {
	force := poolmath.Drain(p.Obj).ForceAfter()
	changed := false
	keep := p.Draining[:0]
	for _, m := range p.Draining {
		switch {
		case !p.DrainBlocked:
			p.w.Note("%s drained", m.Name)
		case force > 0 && !p.w.Now.Before(m.DrainSince.Add(force)):
			p.w.Note("%s drain forced after %s (nodeDrainTimeout)", m.Name, force)
		default:
			keep = append(keep, m)
			continue
		}
		p.track.deleted = append(p.track.deleted, m)
		p.w.Note("%s deleted (%s)", m.Name, m.Cause)
		changed = true
	}
	p.Draining = keep
	return changed
}

// observeDrains is what the controller reads of the draining machines:
// their Machines' Deleting condition, as Cluster API words it.
func (p *Pool) observeDrains() []rollout.NodeDrain {
	var out []rollout.NodeDrain
	for _, m := range p.Draining {
		msg := fmt.Sprintf("Drain not completed yet (started at %s):\n* Pod %s: cannot evict pod as it would violate the pod's disruption budget. The disruption budget %s needs 1 healthy pods and has 1 currently",
			m.DrainSince.UTC().Format("2006-01-02T15:04:05Z07:00"), guardedPod(m), GuardedBudget)
		upToDate := false
		if p.MD != nil {
			for _, ms := range p.MD.Sets {
				if ms.Name == m.Set {
					upToDate = p.upToDate(ms)
				}
			}
		}
		out = append(out, rollout.NodeDrain{Machine: m.Name, Node: m.Name, Since: m.DrainSince, Message: msg, Pods: rollout.DrainBlockers(msg), UpToDate: upToDate})
	}
	return out
}

// UnblockDrains clears the drain knob (the budget allows evictions again).
func (p *Pool) UnblockDrains() { p.DrainBlocked = false }

// drainHalted reports whether the pool's rollout is halted on a drain.
func (p *Pool) drainHalted() bool {
	return p.Recorded(nodepoolv1.AnnotationDrainHalted) != "" || p.Obj.Annotations[nodepoolv1.AnnotationDrainHalted] != ""
}
