package scenario

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// TemplateName is the infrastructure template clone every modelled pool
// uses.
const TemplateName = "tmpl-sim"

// Observe builds the engine's input from the model, as the controller
// observes it: only from the objects (the pool, its Secrets, its
// MachineDeployment or MachineSet, its Machines and Nodes, its history).
func (p *Pool) Observe() rollout.Input {
	now := p.w.Now
	pool := p.Obj.DeepCopy()
	latest, hashes := p.Latest()
	in := rollout.Input{Pool: pool, Now: now, Latest: latest, Hashes: hashes, TemplateName: TemplateName, Settings: p.w.Settings, Current: p.current()}
	in.UserData = make(map[string]rollout.UserData, len(p.UserData))
	for k, v := range p.UserData {
		in.UserData[k] = v
	}
	in.Tokens = make(map[string]rollout.Token, len(p.Tokens))
	for k, v := range p.Tokens {
		in.Tokens[k] = v
	}
	in.Payloads = make(map[string]*payload.Payload, len(p.Payloads))
	for k, v := range p.Payloads {
		in.Payloads[k] = v
	}
	in.Referenced = map[string]bool{}
	refer := func(n string) {
		if n != "" {
			in.Referenced[n] = true
		}
	}
	if md := p.MD; md != nil {
		refer(md.DataSecretName)
		for _, ms := range md.Sets {
			refer(ms.DataSecretName)
		}
	}
	if p.MS != nil {
		refer(p.MS.DataSecretName)
	}
	for _, m := range p.Machines {
		refer(m.DataSecretName)
	}
	if p.MD != nil {
		in.MachineDeployment = p.summarize()
	}
	if p.MS != nil {
		in.MachineDeployment, in.InPlace = p.summarizeInPlace()
	}
	in.NodesUnread = p.nodesUnread
	for _, m := range p.Machines {
		if !m.HasNode(now) || in.NodesUnread {
			continue
		}
		in.Nodes = append(in.Nodes, rollout.Node{Name: m.Name, Payload: payload.PayloadLabelValue(m.Payload), Ready: m.NodeReady(now)})
	}
	if h := pool.Spec.Management.Health; h != nil && !in.NodesUnread {
		// As the controller: without the Nodes no machine's health is
		// known, so the engine gets none.
		for _, m := range p.Machines {
			mh := rollout.MachineHealth{Name: m.Name, UserData: m.DataSecretName, Version: m.Version, Created: m.Created, Signal: "no node yet"}
			if p.MD != nil {
				for _, ms := range p.MD.Sets {
					if ms.Name == m.Set {
						mh.SetCreated = ms.Created
					}
				}
			}
			if p.InPlace() {
				mh.UserData = m.DataSecretName
			}
			if m.HasNode(now) {
				mh.Node = m.Name
				if m.NodeReady(now) {
					mh.Healthy, mh.HealthySince, mh.Signal = true, m.ReadySince, ""
				} else {
					mh.Signal = "Ready=False (KubeletNotReady)"
				}
			}
			if m.Gate != nil {
				g := *m.Gate
				mh.Gate = &g
			}
			in.Machines = append(in.Machines, mh)
		}
	}
	if pool.Spec.Management.Maintenance != nil {
		in.RecentRollouts = p.recentRollouts()
	}
	in.Drains = p.observeDrains() // drain_model.go
	return in
}

// recentRollouts mirrors history.Rollouts: the newest finished
// rollouts, read as their records say (history.Past), the first revision
// (the pool's creation) left out.
func (p *Pool) recentRollouts() []poolmath.PastRollout {
	var out []poolmath.PastRollout
	for i := len(p.History) - 1; i >= 0 && len(out) < history.RecentLimit; i-- {
		r := p.History[i]
		e := history.Entry{Revision: r.Revision, Started: r.Started, Outcome: r.Outcome, Completed: r.Completed, Machines: r.Machines, Rounds: r.Rounds}
		if r.Soak > 0 {
			e.Soak = &metav1.Duration{Duration: r.Soak}
		}
		if past, ok := history.Past(e); ok {
			out = append(out, past)
		}
	}
	for _, past := range p.Past {
		if len(out) >= history.RecentLimit {
			break
		}
		out = append(out, past)
	}
	return out
}

// Outcomes of history records.
const (
	OutcomeInProgress = "InProgress"
	OutcomeComplete   = string(rollout.OutcomeComplete)
	OutcomeSuperseded = string(rollout.OutcomeSuperseded)
	OutcomeFailed     = string(rollout.OutcomeFailed)
)

// summarize mirrors internal/observe.Summarize over the model.
func (p *Pool) summarize() *rollout.MachineDeployment {
	md := p.MD
	now := p.w.Now
	st := p.mdStatus()
	out := &rollout.MachineDeployment{
		DataSecretName: md.DataSecretName, Version: md.Version, SpecReplicas: ptr.To(md.Replicas),
		Replicas: st.replicas, ReadyReplicas: st.ready, UpToDateReplicas: st.upToDate, TemplateName: md.TemplateName,
	}
	var live []*MachineSet
	for _, ms := range md.Sets {
		if ms.Replicas > 0 || p.setMachines(ms.Name) > 0 {
			live = append(live, ms)
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].Created.Before(live[j].Created) })
	out.RunningDataSecretName = md.DataSecretName
	if len(live) > 0 {
		out.RunningDataSecretName = live[0].DataSecretName
	}
	onlyTarget := true
	for _, ms := range live {
		if ms.DataSecretName != md.DataSecretName || ms.Version != md.Version {
			onlyTarget = false
		}
	}
	created := map[string]time.Time{}
	for _, ms := range md.Sets {
		created[ms.Name] = ms.Created
	}
	for _, m := range p.Machines {
		c, ok := created[m.Set]
		if !ok {
			c = m.Created
		}
		out.MachinesCreated = append(out.MachinesCreated, c)
	}
	if md.RolloutAfter != nil {
		t := *md.RolloutAfter
		out.RolloutAfter = &t
		out.MachinesBeforeRolloutAfter = poolmath.CreatedBefore(out.MachinesCreated, t)
	}
	onlyTarget = onlyTarget && out.MachinesBeforeRolloutAfter == 0
	out.Complete = onlyTarget && out.UpToDateReplicas == md.Replicas && out.Replicas == md.Replicas
	if md.Replicas == 0 {
		out.Complete = onlyTarget
	}
	_ = now
	return out
}

type mdStatus struct{ replicas, ready, available, upToDate int32 }

// mdStatus is the MachineDeployment's status as Cluster API computes it.
func (p *Pool) mdStatus() mdStatus {
	var s mdStatus
	newMS := p.newSet()
	for _, m := range p.Machines {
		if !m.Created.Before(p.w.Now) {
			// Cluster API's status counts a machine a reconcile after it
			// made it: a new pool's MachineDeployment is not complete at
			// the look that made it.
			continue
		}
		s.replicas++
		if p.machineReady(m) {
			s.ready++
			s.available++
		}
		if newMS != nil && m.Set == newMS.Name {
			s.upToDate++
		}
	}
	// Machines deleting while their node drains count in status.replicas
	// (not ready, not up to date) until they are gone.
	s.replicas += int32(len(p.Draining))
	return s
}

// summarizeInPlace mirrors internal/observe.SummarizeInPlace, with the
// node state the controller reads from the workload cluster.
func (p *Pool) summarizeInPlace() (*rollout.MachineDeployment, *rollout.InPlace) {
	ms := p.MS
	now := p.w.Now
	out := &rollout.MachineDeployment{DataSecretName: ms.DataSecretName, Version: ms.Version, RunningDataSecretName: ms.DataSecretName,
		SpecReplicas: ptr.To(ms.Replicas), TemplateName: ms.TemplateName}
	for _, m := range p.Machines {
		out.Replicas++
		if m.NodeReady(now) {
			out.ReadyReplicas++
		}
	}
	if ms.RolloutAfter != nil {
		t := ms.RolloutAfter.UTC().Truncate(time.Second)
		out.RolloutAfter = &t
	}
	ip := &rollout.InPlace{MaxUnavailable: poolmath.InPlaceMaxUnavailable(p.Obj.Spec.Management.InPlace.MaxUnavailable, ms.Replicas)}
	ip.DrainTimeout = poolmath.Drain(p.Obj).ForceAfter()
	live := append([]*Machine(nil), p.Machines...)
	sort.SliceStable(live, func(i, j int) bool {
		if !live[i].Created.Equal(live[j].Created) {
			return live[i].Created.Before(live[j].Created)
		}
		return live[i].Name < live[j].Name
	})
	onTarget := int32(0)
	for _, m := range live {
		im := rollout.InPlaceMachine{Machine: m.Name, DataSecretName: m.DataSecretName, Version: m.Version, UpdatedAt: m.UpdatedAt.UTC().Truncate(time.Second)}
		if m.HasNode(now) {
			im.Node, im.Unschedulable = m.Name, m.Unschedulable
			im.Phase, im.WasUnschedulable = m.Phase, m.WasUnschedulable
			im.StartedAt, im.RequestedAt = m.StartedAt.Truncate(time.Second), m.RequestedAt.Truncate(time.Second)
			im.Desired, im.Current, im.State = m.Desired, m.Current, m.State
			if m.Phase == nodepoolv1.UpdatePhaseDraining && p.DrainBlocked {
				im.PodsLeft, im.DrainBlocked = 1, "eviction of pod "+guardedPod(m)+" refused: The disruption budget "+GuardedBudget+" needs 1 healthy pods and has 1 currently"
			}
		}
		ip.Machines = append(ip.Machines, im)
		out.MachinesCreated = append(out.MachinesCreated, im.UpdatedAt)
		before := out.RolloutAfter != nil && im.UpdatedAt.Before(*out.RolloutAfter)
		if before {
			out.MachinesBeforeRolloutAfter++
		}
		if im.DataSecretName != ms.DataSecretName || im.Version != ms.Version {
			if out.RunningDataSecretName == ms.DataSecretName && im.DataSecretName != ms.DataSecretName {
				out.RunningDataSecretName = im.DataSecretName
			}
			continue
		}
		if !before {
			onTarget++
		}
	}
	out.UpToDateReplicas = onTarget
	out.Complete = onTarget == int32(len(live)) && int32(len(live)) == ms.Replicas
	return out, ip
}

// machineReady is Cluster API's Ready (and, without minReadySeconds,
// Available) of a machine: its node Ready and, when the template lists
// the health gate, the gate True.
func (p *Pool) machineReady(m *Machine) bool {
	if !m.NodeReady(p.w.Now) {
		return false
	}
	if p.MD != nil && p.MD.Gated {
		return m.Gate != nil && m.Gate.Status
	}
	return true
}

var _ = nodepoolv1.UpgradeTypeInPlace
