package scenario

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// Causes of a machine's deletion.
const (
	CauseRollout   = "rollout"    // Cluster API replaced it (outdated MachineSet)
	CauseScaleDown = "scale-down" // fewer replicas wanted
	CauseRepair    = "repair"     // the MachineHealthCheck remediated it
	CausePerson    = "person"     // deleted by hand
)

// fenceposts resolves maxSurge and maxUnavailable like Cluster API
// (mdutil.ResolveFenceposts): surge rounds up, unavailable down, and both
// zero means one unavailable.
func fenceposts(surge, unavailable intstr.IntOrString, desired int32) (int32, int32) {
	s, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(desired), true)
	if err != nil {
		s = 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(&unavailable, int(desired), false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), min(int32(u), desired)
}

// upToDate reports whether a MachineSet matches its MachineDeployment's
// template, rollout.after included (a MachineSet created before a
// rollout.after that has come is outdated).
func (p *Pool) upToDate(ms *MachineSet) bool {
	md := p.MD
	if ms.DataSecretName != md.DataSecretName || ms.Version != md.Version || ms.TemplateName != md.TemplateName {
		return false
	}
	if a := md.RolloutAfter; a != nil && !p.w.Now.Before(*a) && ms.Created.Before(*a) {
		return false
	}
	return true
}

// newSet is the MachineSet that matches the template (nil when none): of
// several, the one with the most replicas (the oldest of those), as
// Cluster API chooses for the least churn.
func (p *Pool) newSet() *MachineSet {
	if p.MD == nil {
		return nil
	}
	var best *MachineSet
	for _, ms := range p.MD.Sets {
		if p.upToDate(ms) && (best == nil || ms.Replicas > best.Replicas) {
			best = ms
		}
	}
	return best
}

// setMachines is a MachineSet's status.replicas: its machines, the ones
// Cluster API is deleting (draining) included, as Cluster API counts them
// until they are gone.
func (p *Pool) setMachines(name string) int32 {
	n := int32(0)
	for _, m := range p.Machines {
		if m.Set == name {
			n++
		}
	}
	return n + p.setDraining(name)
}

// setDraining counts a MachineSet's machines deleting while their node drains.
func (p *Pool) setDraining(name string) int32 {
	n := int32(0)
	for _, m := range p.Draining {
		if m.Set == name {
			n++
		}
	}
	return n
}

func (p *Pool) setAvailable(name string) int32 {
	n := int32(0)
	for _, m := range p.Machines {
		if m.Set == name && p.machineReady(m) {
			n++
		}
	}
	return n
}

// reconcileCAPI runs Cluster API's MachineDeployment and MachineSet
// controllers to a fixed point at the current time; it reports whether
// anything changed.
func (p *Pool) reconcileCAPI() bool {
	changed := false
	for range 20 {
		c := false
		if p.MD != nil && !p.MD.Paused {
			c = p.rollingUpdate()
		}
		c = p.finishDrains() || c // drain_model.go
		c = p.syncSets() || c
		if !c {
			break
		}
		changed = true
	}
	return changed
}

// rollingUpdate is Cluster API's rollout planner for RollingUpdate (and
// OnDelete): scale the new MachineSet up within maxSurge, scale old ones
// down counting only available machines, keeping maxUnavailable.
func (p *Pool) rollingUpdate() bool {
	md := p.MD
	changed := false
	newMS := p.newSet()
	if newMS == nil {
		newMS = &MachineSet{Name: p.w.name(p.Name + "-ms"), Created: p.w.Now, DataSecretName: md.DataSecretName, Version: md.Version, TemplateName: md.TemplateName}
		md.Sets = append(md.Sets, newMS)
		changed = true
	}
	var old []*MachineSet
	for _, ms := range md.Sets {
		if ms != newMS {
			old = append(old, ms)
		}
	}
	sort.SliceStable(old, func(i, j int) bool { return old[i].Created.Before(old[j].Created) })
	desired := md.Replicas
	if len(old) == 0 || totalSpec(old) == 0 {
		if newMS.Replicas != desired {
			newMS.Replicas, changed = desired, true
		}
		return p.cleanupSets(old) || changed
	}
	if md.OnDelete {
		// OnDelete: old machines go only when deleted by hand; the new
		// set fills up to the replicas.
		cur := int32(0)
		for _, ms := range md.Sets {
			cur += max(ms.Replicas, p.setMachines(ms.Name))
		}
		if cur < desired {
			newMS.Replicas += desired - cur
			changed = true
		}
		for _, ms := range old {
			if n := p.setMachines(ms.Name); ms.Replicas > n {
				ms.Replicas, changed = n, true
			}
		}
		return p.cleanupSets(old) || changed
	}
	surge, unavailable := fenceposts(md.MaxSurge, md.MaxUnavailable, desired)
	// reconcileNewMachineSet
	switch {
	case newMS.Replicas > desired:
		newMS.Replicas, changed = desired, true
	case newMS.Replicas < desired:
		cur := int32(0)
		for _, ms := range md.Sets {
			cur += max(ms.Replicas, p.setMachines(ms.Name))
		}
		if maxTotal := desired + surge; cur < maxTotal {
			up := min(maxTotal-cur, desired-newMS.Replicas)
			if up > 0 {
				newMS.Replicas += up
				changed = true
			}
		}
	}
	// reconcileOldMachineSetsRollingUpdate
	minAvailable := max(desired-unavailable, 0)
	all := append(append([]*MachineSet(nil), old...), newMS)
	totalSpecReplicas := totalSpec(all)
	totalAvailable := int32(0)
	pending := int32(0)
	for _, ms := range all {
		totalAvailable += p.setAvailable(ms.Name)
		if n := p.setMachines(ms.Name); ms.Replicas < n {
			pending += n - ms.Replicas
		}
	}
	newUnavailable := max(newMS.Replicas-p.setAvailable(newMS.Name), 0)
	scaleDown := max(totalSpecReplicas-pending-minAvailable-newUnavailable, 0)
	for _, onlyUnavailable := range []bool{true, false} {
		for _, ms := range old {
			if scaleDown <= 0 {
				break
			}
			if ms.Replicas <= 0 {
				continue
			}
			avail := p.setAvailable(ms.Name)
			maxDown := ms.Replicas
			if onlyUnavailable {
				maxDown = max(ms.Replicas-avail, 0)
			}
			down := min(maxDown, scaleDown)
			if down == 0 {
				continue
			}
			if avail > 0 {
				newSpec := max(ms.Replicas-down, 0)
				existing := p.setMachines(ms.Name)
				toDelete := max(existing-newSpec, 0)
				if toDelete > 0 {
					if totalAvailable-minAvailable < toDelete {
						canDelete := max(totalAvailable-minAvailable, 0)
						revisited := min(existing-canDelete, ms.Replicas)
						down = max(ms.Replicas-revisited, 0)
						toDelete = max(existing-revisited, 0)
					}
					totalAvailable -= min(avail, toDelete)
				}
			}
			if down > 0 {
				ms.Replicas = max(ms.Replicas-down, 0)
				scaleDown = max(scaleDown-down, 0)
				changed = true
			}
		}
	}
	return p.cleanupSets(old) || changed
}

func totalSpec(sets []*MachineSet) int32 {
	n := int32(0)
	for _, ms := range sets {
		n += ms.Replicas
	}
	return n
}

// cleanupSets removes old MachineSets with no replicas and no machines.
func (p *Pool) cleanupSets(old []*MachineSet) bool {
	changed := false
	keep := p.MD.Sets[:0]
	for _, ms := range p.MD.Sets {
		isOld := false
		for _, o := range old {
			if o == ms {
				isOld = true
			}
		}
		if isOld && ms.Replicas == 0 && p.setMachines(ms.Name) == 0 {
			changed = true
			continue
		}
		keep = append(keep, ms)
	}
	p.MD.Sets = keep
	return changed
}

// syncSets is the MachineSet controller: each set creates machines up to
// its replicas from its template and deletes the surplus (unavailable
// ones first, then the oldest).
func (p *Pool) syncSets() bool {
	changed := false
	type set struct {
		name, ud, version string
		replicas          int32
		cause             string
	}
	var sets []set
	if p.MD != nil {
		newMS := p.newSet()
		for _, ms := range p.MD.Sets {
			cause := CauseScaleDown
			if ms != newMS {
				cause = CauseRollout
			}
			sets = append(sets, set{ms.Name, ms.DataSecretName, ms.Version, ms.Replicas, cause})
		}
	}
	if p.MS != nil {
		sets = append(sets, set{p.Name, p.MS.DataSecretName, p.MS.Version, p.MS.Replicas, CauseScaleDown})
	}
	for _, s := range sets {
		var mine []*Machine
		for _, m := range p.Machines {
			if m.Set == s.name {
				mine = append(mine, m)
			}
		}
		// A deleting machine counts until it is gone, and is the first
		// of a surplus to go: it neither makes room for a new machine nor
		// spares a live one.
		for n := int32(len(mine)) + p.setDraining(s.name); n < s.replicas; n++ {
			p.createMachine(s.name, s.ud, s.version)
			changed = true
		}
		if surplus := int32(len(mine)) - s.replicas; surplus > 0 {
			sort.SliceStable(mine, func(i, j int) bool {
				ri, rj := p.machineReady(mine[i]), p.machineReady(mine[j])
				if ri != rj {
					return !ri
				}
				if !mine[i].Created.Equal(mine[j].Created) {
					return mine[i].Created.Before(mine[j].Created)
				}
				return mine[i].Name < mine[j].Name
			})
			for _, m := range mine[:surplus] {
				p.deleteMachine(m, s.cause)
			}
			changed = true
		}
	}
	return changed
}

// createMachine makes a machine of a set: its node boots the payload its
// user-data's token serves now, and registers after the boot delay.
func (p *Pool) createMachine(set, ud, version string) *Machine {
	w := p.w
	m := &Machine{Name: w.name(p.Name + "-m"), Set: set, Created: w.Now, DataSecretName: ud, Version: version, UpdatedAt: w.Now}
	if u, ok := p.UserData[ud]; ok {
		tokName := secrets.TokenSecretName(p.Name, u.RolloutHash)
		if t, ok := p.Tokens[tokName]; ok {
			m.Payload = t.PayloadHash
			if t.FirstFetch == nil {
				at := w.Now
				t.FirstFetch = &at
				p.Tokens[tokName] = t
			}
		}
	}
	if m.Payload != "" {
		boot := w.BootDelay
		if p.BootDelay > 0 {
			boot = p.BootDelay
		}
		m.NodeAt = w.Now.Add(boot)
		p.scheduleHealth(m, m.NodeAt)
	}
	p.Machines = append(p.Machines, m)
	p.track.created = append(p.track.created, m)
	w.Note("%s created (%s, boots %s)", m.Name, set, Short(m.Payload))
	return m
}

// scheduleHealth sets when the node turns Ready and when (a bad payload)
// it turns NotReady, from from on.
func (p *Pool) scheduleHealth(m *Machine, from time.Time) {
	m.ReadySince, m.UnhealthyAt = time.Time{}, time.Time{}
	bad, after := p.w.badPayload(p, m.Payload)
	switch {
	case bad && after == 0:
		m.UnhealthyAt = from
	case bad:
		m.ReadySince, m.UnhealthyAt = from, from.Add(after)
	default:
		m.ReadySince = from
	}
}

// badPayload reports whether a payload makes nodes unhealthy, and after
// how long.
func (w *World) badPayload(p *Pool, hash string) (bool, time.Duration) {
	pl, ok := p.Payloads[hash]
	if !ok {
		return false, 0
	}
	bad, after := false, time.Duration(0)
	for _, v := range Values(pl) {
		if d, ok := w.Bad[v]; ok {
			if !bad || d < after {
				after = d
			}
			bad = true
		}
	}
	return bad, after
}

func (p *Pool) deleteMachine(m *Machine, cause string) {
	if p.drainHolds(m, cause) { // drain_model.go
		return
	}
	keep := p.Machines[:0]
	for _, x := range p.Machines {
		if x != m {
			keep = append(keep, x)
		}
	}
	p.Machines = keep
	m.Cause = cause
	p.track.deleted = append(p.track.deleted, m)
	p.w.Note("%s deleted (%s)", m.Name, cause)
}

// Resumed is a person's `kubectl nodepool rollout resume` (rollout.Resume:
// the pause ends, a recorded halt is removed); AHaltHolds and
// AHaltedPoolBootsTheLastHealthyPayload no longer hold the pool halted.
func (p *Pool) Resumed() {
	rollout.Resume(p.Obj)
	p.track.resumed = true
	if p.track.haltPayload != "" {
		p.track.failedResumed[p.testedConfig(p.track.haltPayload)] = true
	}
	p.touch()
}

// DeleteMachine deletes a machine by hand.
func (p *Pool) DeleteMachine(name string) {
	for _, m := range p.Machines {
		if m.Name == name {
			p.deleteMachine(m, CausePerson)
			p.touch()
			return
		}
	}
	panic(fmt.Sprintf("scenario: pool %s has no machine %s", p.Name, name))
}

// Defaults of the MachineHealthCheck (the controller's).
const (
	DefaultNodeStartupTimeout = 20 * time.Minute
	DefaultUnhealthyTimeout   = 8 * time.Minute
	DefaultMaxUnhealthy       = 2
)

// remediate is the MachineHealthCheck of a pool with auto repair: a
// machine whose node is NotReady for unhealthyTimeout, or that has no
// node after nodeStartupTimeout, is deleted (at most maxUnhealthy
// unhealthy machines; beyond that nothing is remediated).
func (p *Pool) remediate(dry bool) (bool, time.Time) {
	a := p.Obj.Spec.Management.AutoRepair
	var next time.Time
	if a == nil {
		return false, next
	}
	now := p.w.Now
	unhealthyTimeout, startup := DefaultUnhealthyTimeout, DefaultNodeStartupTimeout
	if a.UnhealthyTimeout != nil {
		unhealthyTimeout = a.UnhealthyTimeout.Duration
	}
	if a.NodeStartupTimeout != nil {
		startup = a.NodeStartupTimeout.Duration
	}
	var due []*Machine
	unhealthy := 0
	for _, m := range p.Machines {
		var at time.Time
		switch {
		case !m.HasNode(now) && !m.NodeAt.IsZero():
			continue // booting
		case m.NodeAt.IsZero():
			at = m.Created.Add(startup)
		case !m.NodeReady(now):
			at = m.UnhealthyAt.Add(unhealthyTimeout)
		default:
			if !m.UnhealthyAt.IsZero() {
				at = m.UnhealthyAt.Add(unhealthyTimeout)
				if next.IsZero() || at.Before(next) {
					next = at
				}
			}
			continue
		}
		unhealthy++
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		due = append(due, m)
	}
	maxUnhealthy := intstr.FromInt32(DefaultMaxUnhealthy)
	if a.MaxUnhealthy != nil {
		maxUnhealthy = *a.MaxUnhealthy
	}
	limit, err := intstr.GetScaledValueFromIntOrPercent(&maxUnhealthy, len(p.Machines), false)
	if err != nil {
		limit = DefaultMaxUnhealthy
	}
	if unhealthy > limit || len(due) == 0 || dry {
		return false, next
	}
	for _, m := range due {
		p.deleteMachine(m, CauseRepair)
	}
	return true, next
}

var _ = nodepoolv1.UpgradeTypeInPlace
