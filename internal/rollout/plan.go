package rollout

import (
	"fmt"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// Decide computes the plan for one reconcile of a pool. It is pure: the same
// input always gives the same plan. The decision comes first (decide); every
// step after it derives its part of the plan from the decision and the
// input, and none rewrites what another planned.
func Decide(in Input) Plan {
	p := Plan{Annotations: map[string]string{}}
	in = resumeRequested(in, &p) // record.go
	in = forcedUserData(in, &p)  // forced.go
	stored := in.UserData
	in = restoreUserData(in, &p)
	in = rolledBackLatest(in) // health.go
	running := runningUserData(in)
	seedAnnotations(in, running, &p)

	d, o, drift := decide(in, running)
	ownerEvents(in, o, d.Pause, &p)
	tin := latestForTarget(in, d.Target) // tokens.go
	if d.Target != nil {
		target := *d.Target
		if d.Action == ActionForce {
			target.PayloadHash = tin.Latest.Hash
		}
		tokenName := secrets.TokenSecretName(in.Pool.Name, target.RolloutHash)
		d.TokenPayload = tokenPointer(tin, &target, running, o.started, d.Action == ActionForce, &p)
		if d.Health != nil && d.Health.LastHealthy != "" {
			d.TokenPayload = d.Health.LastHealthy // a halted rollout: health_halt.go
		}
		if own := rollingBackPayload(in, d); own != "" {
			d.TokenPayload = own // health_halt.go
		}
		planToken(in, tokenName, target.RolloutHash, d.TokenPayload, &p)
		_, exists := stored[target.Name]
		p.UserData = append(p.UserData, UserDataAction{UserData: target, TokenName: tokenName, Create: !exists})
		p.MachineDeployment = &MachineDeploymentTarget{DataSecretName: target.Name, Version: target.Version, TemplateName: target.TemplateName, TemplateKind: target.TemplateKind}
	}
	planOlderTokens(in, d, stored, &p)
	repointMissingPayloads(in, &p)
	planDrift(in, drift.pending, &p)
	planForce(tin, d, &p)
	if o.started && !recreated(in, d.Target) {
		p.Record = ownerRecord(in, currentTarget(in), d.Target)
	}
	if d.RollbackFrom != nil {
		p.Record = rollbackRecord(in, d.Target, d.RollbackFrom)
	}
	recordShape(in, d, &p) // window_fit.go
	d.Components = componentsChanging(in, stored, p.Record)
	d.Drain = decideDrain(in, d.Target) // drain.go
	d.DrainForecast = forecastDrains(in, d)
	p.Decision = d
	hold := planInPlace(in, d.Target, &p)
	planStatus(in, d, hold, &p)
	planWindow(in, d, &p)
	planHealth(in, d, &p)
	planDrain(in, d.Drain, &p) // after the health gate: a drain halt says RolloutHealthy
	endRecords(in, d, &p)      // ended.go
	moveOlderRecords(in, &p)   // record.go
	carryOn(in, &p)
	keepWithoutRecord(in, &p)
	planBootstrapData(in, &p)
	planCleanup(in, d.Target, running, &p)
	planRequeue(in, &p)
	requeueHealth(in, d, &p)
	requeueDrain(in, d.Drain, &p)            // drain.go
	p.Decision.Standing = standingOf(in, &p) // standing.go
	p.Decision.Standing.CarriedDrift = drift.carried
	return p
}

// decide makes the decision: the owner's intent first, then, unless that
// starts a rollout, the forced rollouts requested, then the health gate
// (which may roll the target back): the Decision is final when it
// returns. It also returns the pending platform drift, which the Rollout
// policy turns into a request.
func decide(in Input, running *UserData) (Decision, owner, driftRows) {
	pause := poolmath.PauseAt(in.Pool, in.Now)
	o := decideOwner(in, pause)
	cal, ws := windowState(in)
	o = holdOwner(in, cal, ws, o)
	var current *int32
	if md := in.MachineDeployment; md != nil {
		current = md.SpecReplicas
	}
	d := Decision{Action: ActionNone, Pause: pause, Target: o.target, Running: running,
		Replicas: poolmath.DesiredReplicas(&in.Pool.Spec, current), AutoScaling: poolmath.Autoscaled(&in.Pool.Spec)}
	d.Strategy = strategyOf(&in.Pool.Spec, d.Replicas) // strategy.go
	base := o.target
	if base == nil {
		base = running
	}
	drift := pendingDrift(in, base, running)
	pending := drift.pending
	ws.setDeadline(in, pending)
	if !o.started {
		d.Forced = decideForce(in, o.target, pending, pause)
		holdForced(in, cal, ws, d.Forced)
	}
	d.Window = ws
	md := in.MachineDeployment
	live := int32(0)
	if md != nil {
		live = int32(len(md.MachinesCreated))
	}
	owned := max(live, d.Replicas)
	forcedMachines := func(at time.Time) int32 {
		if md == nil {
			return 0
		}
		return poolmath.CreatedBefore(md.MachinesCreated, at)
	}
	f := d.Forced
	drainHalted := drainHaltHolds(in, o.target) // drain.go
	if f != nil && f.State == ForcedStarts && (haltHolds(in, o.target) != nil || drainHalted) {
		f.State = ForcedHalted // health_halt.go: a halt holds until a resume or an owner change
	}
	if f != nil && f.State == ForcedStarts && rollingBack(in) {
		f.State = ForcedAfterRollback // health.go
	}
	switch {
	case in.RenderErr != nil:
		d.Action, d.Reason = ActionInvalid, in.RenderErr.Error()
	case o.held:
		d.Action, d.Reason = ActionHold, "the user-data the MachineDeployment references is gone and cannot be rebuilt"
	case o.started && md == nil:
		d.Action, d.Initiator, d.At, d.Machines = ActionCreate, InitiatorSpec, in.Now, d.Replicas
	case o.started:
		d.Action, d.Initiator, d.At, d.Machines = ActionStart, ownerInitiator(o.current, o.target), in.Now, owned
	case f != nil && f.State == ForcedHalted:
		d.Action, d.Initiator, d.At, d.Machines = ActionHold, f.Initiator, f.At, forcedMachines(f.At)
		by := "its health gate"
		if drainHalted && haltHolds(in, o.target) == nil {
			by = "a node that did not drain (onTimeout Halt)"
		}
		d.Reason = fmt.Sprintf("the rollout is halted by %s: the forced rollout (%s, machines created before %s) waits until `kubectl nodepool rollout resume` or an owner change",
			by, f.Initiator, f.At.UTC().Format(time.RFC3339))
	case f != nil && f.State == ForcedAfterRollback:
		d.Action, d.Initiator, d.At, d.Machines = ActionHold, f.Initiator, f.At, forcedMachines(f.At)
		d.Reason = fmt.Sprintf("the pool rolls back to the previous revision: the forced rollout (%s, machines created before %s) starts once every machine runs it, with its own canary",
			f.Initiator, f.At.UTC().Format(time.RFC3339))
	case f != nil && f.State == ForcedStarts:
		d.Action, d.Initiator, d.At, d.Machines = ActionForce, f.Initiator, f.At, forcedMachines(f.At)
	case o.deferred:
		d.Action, d.Initiator, d.Machines = ActionDefer, ownerInitiator(o.current, pendingTarget(in)), owned
	case f != nil && f.State == ForcedDeferred:
		d.Action, d.Initiator, d.At, d.Machines = ActionDefer, f.Initiator, f.At, forcedMachines(f.At)
	case f != nil && f.State == ForcedScheduled:
		d.Action, d.Initiator, d.At, d.Machines = ActionSchedule, f.Initiator, f.At, forcedMachines(f.At)
	}
	d.InProgress = replacing(md, running, o.target) || forcedInProgress(md)
	d.Health = decideHealth(in, d, running)
	d.RollbackFrom = healthRollback(&d, running) // health.go
	return d, o, drift
}

// componentsChanging are the payload components the rollout changes: the
// record's of a rollout that starts, else the difference between the
// payload of the user-data the MachineDeployment references (as stored)
// and the latest.
func componentsChanging(in Input, stored map[string]UserData, rec *Record) []string {
	if rec != nil {
		return rec.Changed
	}
	if in.Latest == nil || in.MachineDeployment == nil {
		return nil
	}
	ud, ok := stored[in.MachineDeployment.DataSecretName]
	if !ok {
		return nil
	}
	base, ok := in.Payloads[ud.PayloadHash]
	if !ok {
		return nil
	}
	var names []string
	for _, ch := range payload.Diff(base.Manifest, in.Latest.Manifest) {
		names = append(names, ch.Component.Name())
	}
	return names
}

// pendingTarget is the rollout the current inputs ask for, as user-data
// (for the initiator of a held owner change).
func pendingTarget(in Input) *UserData {
	return &UserData{RolloutWithoutVersion: in.Hashes.RolloutWithoutVersion, Version: in.Pool.Spec.Release.Version}
}

// planOlderTokens keeps the tokens of older rollouts still used by machines
// rotating, and their user-data carrying their current token. A token gone
// from under machines that still use its user-data is made again, serving
// the payload that rollout started with. While the pool rolls back, the
// failed rollout's token serves what the rollback boots: a machine of its
// MachineSet repaired or deleted before Cluster API has scaled that
// MachineSet down is made again, and must not boot the payload that
// failed (seed 1348).
func planOlderTokens(in Input, d Decision, stored map[string]UserData, p *Plan) {
	target := d.Target
	for _, name := range sortedKeys(in.UserData) {
		ud := in.UserData[name]
		if (target != nil && name == target.Name) || !in.Referenced[name] {
			continue
		}
		tokenName := secrets.TokenSecretName(in.Pool.Name, ud.RolloutHash)
		serves := ud.PayloadHash
		if t, ok := in.Tokens[tokenName]; ok {
			serves = t.PayloadHash
		}
		if f := d.RollbackFrom; f != nil && f.Name == name && d.TokenPayload != "" {
			serves = d.TokenPayload
		}
		if serves != "" {
			planToken(in, tokenName, ud.RolloutHash, serves, p)
			_, exists := stored[name]
			p.UserData = append(p.UserData, UserDataAction{UserData: ud, TokenName: tokenName, Create: !exists})
		}
	}
}

// Requeue intervals while something moves that raises no event: a rollout
// in progress is looked at every RolloutPollInterval in its first minutes,
// then every twentieth of its age, at most MaxRolloutPollInterval
// (rolloutPoll); a node update (whose drain progresses without events)
// every NodeUpdatePollInterval; a pool whose machines are not all ready
// every NotReadyPollInterval (a missed Node or Machine event must not
// hold a machine's health gate until the resync).
const (
	RolloutPollInterval    = 5 * time.Second
	MaxRolloutPollInterval = 60 * time.Second
	NodeUpdatePollInterval = 2 * time.Second
	NotReadyPollInterval   = 30 * time.Second
	// rolloutPollShare is the share of a rollout's age its poll waits.
	rolloutPollShare = 20
)

// rolloutPoll is how long a rollout in progress waits for its next look
// when no event comes: what moves it raises events (its machines, their
// Nodes, a person's request) and its deadlines are looked at when due, so
// the poll only bounds how long a missed event goes unseen. A rollout
// that has taken an hour loses little to a minute's delay, and a fleet of
// long rollouts is not looked at every few seconds a pool while Cluster
// API works (the 1,000-pool fleet rollout's pools were looked at some 480
// times each). A rollout starting now, or one the engine cannot date, is
// young.
func rolloutPoll(in Input, p *Plan) time.Duration {
	started := in.Now
	if p.Record == nil && in.Current != nil && in.Current.InProgress && !in.Current.Started.IsZero() {
		started = in.Current.Started
	}
	return min(max(in.Now.Sub(started)/rolloutPollShare, RolloutPollInterval), MaxRolloutPollInterval)
}

// planRequeue asks to look again before the next token rotation, pause
// expiry, scheduled forced rollout or cleanup is due, and at the latest
// after the resync period; sooner while a rollout or a node update is in
// progress.
func planRequeue(in Input, p *Plan) {
	next := time.Duration(0)
	consider := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, t := range in.Tokens {
		consider(t.RotatedAt.Add(in.Settings.TokenTTL / 2).Sub(in.Now))
	}
	if d := p.Decision; !d.Pause.Until.IsZero() {
		consider(d.Pause.Until.Sub(in.Now))
	}
	if f := p.Decision.Forced; f != nil && f.State == ForcedScheduled {
		consider(f.At.Sub(in.Now))
	}
	considerWindow(in, p.Decision, consider)
	if len(p.Delete) == 0 && in.Settings.CleanupGracePeriod > 0 {
		for name, ud := range in.UserData {
			if in.Referenced[name] {
				continue
			}
			since := in.Now
			if ud.UnreferencedSince != nil {
				since = *ud.UnreferencedSince
			}
			consider(since.Add(in.Settings.CleanupGracePeriod).Sub(in.Now))
		}
	}
	if next > 0 {
		next += time.Second
	}
	limit := in.Settings.ResyncPeriod
	p.DueAfter = minPositive(next, limit)
	if p.Updating != "" {
		limit = minPositive(limit, rolloutPoll(in, p))
	}
	if p.UpdateInProgress && !p.Decision.Halted() {
		// While a halt holds, no drain progresses and no node starts: a
		// node that waits in its update moves only on its agent's or a
		// person's write, which is an event (seed 4686: a halted pool
		// was looked at every 2s for hours).
		limit = minPositive(limit, NodeUpdatePollInterval)
	}
	if md := in.MachineDeployment; md != nil && md.ReadyReplicas < p.Decision.Replicas {
		limit = minPositive(limit, NotReadyPollInterval)
	}
	p.RequeueAfter = minPositive(next, limit)
}

// minPositive is the smaller of two durations, 0 meaning none.
func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// ownerInitiator is version when only the release version changes, else
// spec.
func ownerInitiator(from, to *UserData) Initiator {
	if from != nil && to != nil && from.RolloutWithoutVersion == to.RolloutWithoutVersion && from.Version != to.Version {
		return InitiatorVersion
	}
	return InitiatorSpec
}

// annotation reads a pool annotation, "" when unset.
func annotation(pool *nodepoolv1.NodePool, key string) string {
	if pool.Annotations == nil {
		return ""
	}
	return pool.Annotations[key]
}

// ownerRecord describes a rollout the owner started (or the first one of a
// new pool): initiator version when only the release version changed.
func ownerRecord(in Input, from, to *UserData) *Record {
	r := &Record{Initiator: ownerInitiator(from, to), RolloutHash: to.RolloutHash, PayloadHash: in.Latest.Hash, Started: in.Now}
	if from != nil {
		if old, ok := in.Payloads[from.PayloadHash]; ok {
			for _, ch := range payload.Diff(old.Manifest, in.Latest.Manifest) {
				r.Changed = append(r.Changed, ch.Component.Name())
			}
		}
	} else {
		for _, c := range inputs.Components() {
			r.Changed = append(r.Changed, c.Name())
		}
	}
	return r
}
