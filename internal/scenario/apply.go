package scenario

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// apply carries out a plan on the model as the controller does: history
// first, then payloads, tokens, new user-data, the MachineDeployment (or
// MachineSet and node actions), gates, user-data rewrites, cleanup marks
// and deletions; the pool's annotations and status last. It reports
// whether the controller stopped right after the MachineDeployment
// (World.CrashAfterMachineDeployment): what it wrote until then stays.
func (p *Pool) apply(in rollout.Input, plan rollout.Plan) (stopped bool) {
	now := p.w.Now
	p.Events = append(p.Events, plan.Events...)
	p.recordHistory(plan)
	for _, pl := range plan.Payloads {
		if _, ok := p.Payloads[pl.Hash]; !ok {
			p.Payloads[pl.Hash] = pl
		}
	}
	for _, a := range plan.Tokens {
		t, ok := p.Tokens[a.Name]
		if ok && !a.Create && !a.Rotate && t.PayloadHash == a.PayloadHash {
			continue
		}
		if !ok {
			t = rollout.Token{Name: a.Name, Created: now, RotatedAt: now}
		}
		if a.Rotate {
			t.RotatedAt = now
		}
		t.RolloutHash, t.PayloadHash = a.RolloutHash, a.PayloadHash
		p.Tokens[a.Name] = t
	}
	for _, a := range plan.UserData {
		if _, exists := p.UserData[a.Name]; exists {
			continue
		}
		ud := a.UserData
		ud.Created = now
		p.UserData[a.Name] = ud
	}
	if p.InPlace() {
		p.applyMachineSet(plan.MachineDeployment)
		p.applyNodeActions(plan)
	} else {
		var before MachineDeployment
		if p.MD != nil {
			before = *p.MD
		}
		p.applyMachineDeployment(plan.MachineDeployment)
		if p.w.CrashAfterMachineDeployment && p.MD != nil && (p.MD.DataSecretName != before.DataSecretName || !equalTimes(p.MD.RolloutAfter, before.RolloutAfter)) {
			// The record's state is written with the record, before the
			// plan is applied.
			p.writeRecordState(plan)
			return true
		}
	}
	for _, g := range plan.Gates {
		for _, m := range p.Machines {
			if m.Name != g.Machine {
				continue
			}
			since := now
			if m.Gate != nil && m.Gate.Status == g.Status {
				since = m.Gate.Since
			}
			m.Gate = &rollout.Gate{Status: g.Status, Reason: g.Reason, Message: g.Message, Since: since}
		}
	}
	for _, a := range plan.UserData {
		if ud, exists := p.UserData[a.Name]; exists {
			// A rewrite keeps what the Secret records (its creation and
			// cleanup mark); the pointer config changes.
			keep := a.UserData
			keep.Created, keep.UnreferencedSince = ud.Created, ud.UnreferencedSince
			p.UserData[a.Name] = keep
		}
	}
	for _, name := range plan.MarkUnreferenced {
		if ud, ok := p.UserData[name]; ok {
			at := now
			ud.UnreferencedSince = &at
			p.UserData[name] = ud
		}
	}
	for _, name := range plan.MarkReferenced {
		if ud, ok := p.UserData[name]; ok {
			ud.UnreferencedSince = nil
			p.UserData[name] = ud
		}
	}
	for _, name := range plan.Delete {
		delete(p.UserData, name)
		delete(p.Tokens, name)
		for h := range p.Payloads {
			if secrets.PayloadSecretName(p.Name, h) == name {
				delete(p.Payloads, h)
			}
		}
	}
	for k, v := range plan.Annotations {
		p.setAnnotation(k, v)
	}
	p.writeRecordState(plan)
	p.writeStatus(in, plan)
	return false
}

// equalTimes reports whether two optional times are the same.
func equalTimes(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// writeStatus copies the plan's status and conditions onto the pool.
func (p *Pool) writeStatus(in rollout.Input, plan rollout.Plan) {
	st := &p.Obj.Status
	st.ObservedGeneration = p.Obj.Generation
	st.Version, st.Updating, st.PendingManagementChanges, st.Nodes = plan.Version, plan.Updating, plan.Pending, plan.Nodes
	st.DesiredReplicas = plan.Decision.Replicas
	st.Maintenance = plan.Maintenance
	st.Drains = plan.Drains
	if plan.Maintenance == nil {
		meta.RemoveStatusCondition(&st.Conditions, nodepoolv1.ConditionMaintenanceWindow)
	}
	if md := in.MachineDeployment; md != nil {
		st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = md.Replicas, md.ReadyReplicas, md.UpToDateReplicas
	}
	st.Rollout = plan.Decision.Standing.Published()
	if n := len(p.History); n > 0 {
		st.Rollout.Revision = p.History[n-1].Revision
	}
	active := metav1.Condition{Type: nodepoolv1.ConditionReconciliationActive, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	for _, c := range append(append([]metav1.Condition(nil), plan.Conditions...), active) {
		c.ObservedGeneration = p.Obj.Generation
		c.LastTransitionTime = metav1.NewTime(p.w.Now)
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// writeRecordState mirrors the controller's: what the engine keeps on the
// current rollout (the newest record, the one the plan started included),
// on the pool's annotations while it has no record.
func (p *Pool) writeRecordState(plan rollout.Plan) {
	if len(plan.RecordState) == 0 {
		return
	}
	n := len(p.History)
	if n == 0 {
		for k, v := range plan.RecordState {
			p.setAnnotation(k, v)
		}
		return
	}
	r := &p.History[n-1]
	if r.State == nil {
		r.State = map[string]string{}
	}
	for k, v := range plan.RecordState {
		if v == "" {
			delete(r.State, k)
			continue
		}
		r.State[k] = v
	}
}

// recordHistory mirrors the controller's: a new record for a rollout that
// starts (unless the last in progress is the same), the outcome of those
// in progress.
func (p *Pool) recordHistory(plan rollout.Plan) {
	if plan.Record != nil {
		if n := len(p.History); n > 0 && sameRollout(p.History[n-1], plan.Record) {
			return
		}
	}
	if plan.Finish != "" {
		for i := range p.History {
			r := &p.History[i]
			if r.Outcome != OutcomeInProgress {
				continue
			}
			at := plan.FinishedAt
			r.Outcome, r.Completed = string(plan.Finish), &at
			p.w.Note("revision %d %s", r.Revision, r.Outcome)
		}
	}
	if plan.Record == nil {
		return
	}
	rec := Record{Revision: int64(len(p.History)) + 1, Record: *plan.Record, Outcome: OutcomeInProgress}
	if n := len(p.History); n > 0 {
		rec.Revision = p.History[n-1].Revision + 1
	}
	p.History = append(p.History, rec)
	p.track.started = append(p.track.started, rec)
	what := string(rec.Initiator)
	if rec.ForcedAt != nil {
		what += " forced at " + rec.ForcedAt.UTC().Format(time.RFC3339)
	}
	p.w.Note("revision %d started (%s, payload %s)", rec.Revision, what, Short(rec.PayloadHash))
}

func sameRollout(r Record, rec *rollout.Record) bool {
	if r.Outcome != OutcomeInProgress || r.Initiator != rec.Initiator || r.RolloutHash != rec.RolloutHash {
		return false
	}
	if (r.ForcedAt == nil) != (rec.ForcedAt == nil) {
		return false
	}
	return r.ForcedAt == nil || r.ForcedAt.Equal(*rec.ForcedAt)
}

// applyMachineDeployment mirrors desiredMachineDeployment.
func (p *Pool) applyMachineDeployment(t *rollout.MachineDeploymentTarget) {
	spec := &p.Obj.Spec
	if p.MD == nil {
		if t == nil {
			return
		}
		p.MD = &MachineDeployment{}
	}
	md := p.MD
	var current *int32
	if p.MD != nil {
		current = ptr.To(md.Replicas)
	}
	md.Replicas = poolmath.DesiredReplicas(spec, current)
	if t != nil && t.Replicas != nil {
		md.Replicas = *t.Replicas // a scale-up waits for the canary
	}
	r := spec.Management.Replace
	md.OnDelete = r.Strategy == nodepoolv1.ReplaceStrategyOnDelete
	surge, unavailable := r.RollingUpdate.MaxSurge, r.RollingUpdate.MaxUnavailable
	if t != nil && t.MaxSurge != nil && t.MaxUnavailable != nil {
		// The health gate's canary is on trial: the engine's limits hold
		// the rest of its round, as the controller writes them.
		surge, unavailable = t.MaxSurge, t.MaxUnavailable
	}
	md.MaxSurge = ptr.Deref(surge, poolmath.DefaultMaxSurge)
	md.MaxUnavailable = ptr.Deref(unavailable, poolmath.DefaultMaxUnavailable)
	md.Gated = spec.Management.Health != nil
	if t == nil {
		return
	}
	md.Paused = t.Paused
	if t.RolloutAfter != nil {
		a := *t.RolloutAfter
		md.RolloutAfter = &a
	}
	if t.ClearRolloutAfter {
		md.RolloutAfter = nil
	}
	md.DataSecretName, md.Version = t.DataSecretName, t.Version
	if t.TemplateName != "" {
		md.TemplateName = t.TemplateName
	}
}

// applyMachineSet mirrors desiredMachineSet (InPlace pools).
func (p *Pool) applyMachineSet(t *rollout.MachineDeploymentTarget) {
	if p.MS == nil {
		if t == nil {
			return
		}
		p.MS = &InPlaceSet{Created: p.w.Now}
	}
	ms := p.MS
	ms.Replicas = poolmath.DesiredReplicas(&p.Obj.Spec, ptr.To(ms.Replicas))
	if t == nil {
		return
	}
	if t.RolloutAfter != nil {
		a := t.RolloutAfter.UTC().Truncate(time.Second)
		ms.RolloutAfter = &a
	}
	ms.DataSecretName, ms.Version = t.DataSecretName, t.Version
	if t.TemplateName != "" {
		ms.TemplateName = t.TemplateName
	}
}

// applyNodeActions carries out an InPlace pool's node steps (the drain
// always succeeds at once in the model).
func (p *Pool) applyNodeActions(plan rollout.Plan) {
	now := p.w.Now
	if len(plan.NodeActions) > 0 && p.w.NoPolls {
		// The controller's writes to a Node it watches are events; the
		// traced worlds see them at the next poll, a world without
		// polls at once.
		p.touch()
	}
	for _, a := range plan.NodeActions {
		var m *Machine
		for _, x := range p.Machines {
			if x.Name == a.Machine {
				m = x
			}
		}
		if m == nil || !m.HasNode(now) {
			continue
		}
		switch a.Step {
		case rollout.StepStart:
			m.Unschedulable = true
			m.Phase, m.StartedAt = nodepoolv1.UpdatePhaseDraining, now
			m.WasUnschedulable = a.Cordoned
			m.ReadyAtStart = m.NodeReady(now) && !a.Cordoned
			p.w.Note("%s cordoned, draining", m.Name)
		case rollout.StepRequest:
			if m.Desired != a.Payload || m.Phase != nodepoolv1.UpdatePhaseUpdating {
				m.AgentAt = now.Add(p.agentDelay())
				m.State = ""
			}
			m.Phase, m.Desired, m.RequestedAt = nodepoolv1.UpdatePhaseUpdating, a.Payload, now
			p.w.Note("%s asked for %s", m.Name, Short(a.Payload))
		case rollout.StepFinish:
			m.DataSecretName, m.Version = a.DataSecretName, a.Version
			m.UpdatedAt = now.Truncate(time.Second)
			if a.Uncordon {
				m.Unschedulable = false
			}
			m.Phase, m.StartedAt, m.RequestedAt, m.WasUnschedulable = "", time.Time{}, time.Time{}, false
			p.w.Note("%s updated in place to %s", m.Name, Short(m.Payload))
		}
	}
}

// runAgents is the node agent of each node asked for a payload: after the
// agent delay it reports Done on it, and the node runs it (healthy or not
// by the payload).
func (p *Pool) runAgents() (bool, time.Time) {
	now := p.w.Now
	changed := false
	var next time.Time
	for _, m := range p.Machines {
		if m.Phase != nodepoolv1.UpdatePhaseUpdating || m.State == nodepoolv1.UpdateStateDone {
			continue
		}
		if now.Before(m.AgentAt) {
			if next.IsZero() || m.AgentAt.Before(next) {
				next = m.AgentAt
			}
			continue
		}
		m.Current, m.State, m.Payload = m.Desired, nodepoolv1.UpdateStateDone, m.Desired
		p.scheduleHealth(m, now)
		changed = true
		p.w.Note("%s agent done on %s", m.Name, Short(m.Desired))
	}
	return changed, next
}

// agentDelay is how long its node agent takes to apply a payload.
func (p *Pool) agentDelay() time.Duration {
	if p.AgentDelay > 0 {
		return p.AgentDelay
	}
	return p.w.AgentDelay
}
