package fleet

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// Pool is what the controller observed of one selected pool.
type Pool struct {
	// Exists is false for a pool deleted since the selection.
	Exists bool
	// HasDrift: status.pendingManagementChanges is not empty.
	HasDrift bool
	// Paused: spec.management.pausedUntil holds rollouts now.
	Paused bool
	// Updating: a rollout of the pool is in progress (status.updating).
	Updating bool
	// Held is the MaintenanceWindow condition when False (the pool's
	// window or exclusion holds a rollout), nil otherwise.
	Held *Condition
	// Unhealthy is the RolloutHealthy condition when False, nil otherwise.
	Unhealthy *Condition
	// Ready is the pool's Ready condition.
	Ready bool
	// Settled: the controller saw the latest spec and its standing says
	// the pool is settled (status.rollout.settled: nothing is rolling,
	// every machine is up to date and ready).
	Settled bool
	// Replicas is how many machines the pool has.
	Replicas int32
	// Fleet and At are the pool's fleet-rollout and apply-pending
	// annotations ("" when absent).
	Fleet, At string
	// OutsideReason is the reason of an emergency request
	// (nodepool.dev/outside-windows-reason) when it is for At.
	OutsideReason string
	// Record is the pool's newest history record of a forced rollout at or
	// after this fleet rollout's trigger, whoever requested it (the
	// trigger itself, a drift deadline, a newer rolloutAfter, a hand
	// apply-pending): once it completes, no machine older than the
	// trigger is left. Nil before the pool started one.
	Record *Record
}

// Condition is a condition's reason and message.
type Condition struct{ Reason, Message string }

// Record is a history record of a pool.
type Record struct {
	Revision int64
	// Outcome is InProgress, Complete or Superseded.
	Outcome string
	// Initiator is who requested the rollout (history's initiator).
	Initiator string
	// ForcedAt is its forced time: every machine created before it is
	// replaced.
	ForcedAt *time.Time
}

// Outcomes of a history record: the history package's.
const (
	OutcomeComplete   = history.OutcomeComplete
	OutcomeSuperseded = history.OutcomeSuperseded
)

// Input is what Decide weighs.
type Input struct {
	Name   string
	Spec   nodepoolv1.FleetRolloutSpec
	Status nodepoolv1.FleetRolloutStatus
	// Generation is the FleetRollout's metadata.generation.
	Generation int64
	// Members are the selected pools with the state kept on each of them
	// (see Decode): a pool deleted since the selection is missing, and
	// counted as skipped.
	Members []nodepoolv1.FleetRolloutPool
	// Pools are the observations of the members (a missing one is
	// treated as deleted).
	Pools map[Ref]Pool
	Now   time.Time
}

// Trigger asks the controller to annotate a pool: apply-pending-at At and
// fleet-rollout Name. Retry is set when the status already recorded it
// (a write that did not happen, or was undone, before a restart).
type Trigger struct {
	Ref
	At    time.Time
	Retry bool
}

// Release asks the controller to remove the fleet-rollout annotation of a
// pool, and its apply-pending annotation when it still holds At (a pool
// skipped or cancelled before its rollout started must not roll later).
type Release struct {
	Ref
	At *time.Time
}

// Event is an event on the FleetRollout.
type Event struct{ Type, Reason, Message string }

// Result is the decision: the status to write first, then the pools to
// annotate and release.
type Result struct {
	// Status is bounded: counts per wave and the pools that need a person.
	Status nodepoolv1.FleetRolloutStatus
	// Pools is every member with its state now, in namespace/name order.
	Pools []nodepoolv1.FleetRolloutPool
	// Store are the members whose kept state changed: the controller
	// writes each on its pool (annotation FleetRolloutPoolAnnotation), in
	// the same patch as the pool's trigger or release.
	Store        []Store
	Triggers     []Trigger
	Releases     []Release
	Events       []Event
	RequeueAfter time.Duration
}

// Decide computes the next step of a started fleet rollout (status.pools
// assigned, see Assign).
func Decide(in Input) Result {
	d := newDecider(in)
	d.run()
	return d.finish()
}

func newDecider(in Input) *decider {
	d := &decider{in: in, res: Result{Status: *in.Status.DeepCopy()}, held: map[Ref]bool{}}
	d.pools = members(in.Members)
	d.kept = make([]kept, len(d.pools))
	for i, p := range d.pools {
		d.kept[i] = keptOf(p)
	}
	return d
}

// finish counts, lists the pools that need a person, and names the
// members whose kept state changed.
func (d *decider) finish() Result {
	st := &d.res.Status
	Count(d.pools, st.Waves)
	st.Attention, st.AttentionOmitted = attention(d.pools, d.held)
	st.ObservedGeneration = d.in.Generation
	d.conditions()
	// Only the members whose kept state changed are encoded: a decision
	// over thousands of pools changes a few.
	for i, p := range d.pools {
		if k := keptOf(p); k != d.kept[i] {
			d.res.Store = append(d.res.Store, Store{Ref: RefOf(p), Value: k.encode()})
		}
	}
	d.res.Pools = d.pools
	return d.res
}

type decider struct {
	in  Input
	res Result
	// pools are the members, their state updated as the decision goes.
	pools []nodepoolv1.FleetRolloutPool
	// held are the pools whose pause, window or exclusion holds them.
	held map[Ref]bool
	// kept is what each of pools keeps on its pool before the decision.
	kept []kept
}

func (d *decider) st() *nodepoolv1.FleetRolloutStatus { return &d.res.Status }

func (d *decider) event(typ, reason, format string, args ...any) {
	d.res.Events = append(d.res.Events, Event{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (d *decider) now() *metav1.Time { t := metav1.NewTime(d.in.Now); return &t }

func (d *decider) run() {
	st := d.st()
	switch st.Phase {
	case nodepoolv1.FleetPhaseComplete, nodepoolv1.FleetPhaseCancelled:
		d.releaseFinished()
		return
	}
	for i := range d.pools {
		d.observe(&d.pools[i])
	}
	defer d.releaseFinished() // the pools whose part ended, whatever comes next
	if d.in.Spec.Cancelled {
		d.cancel()
		return
	}
	if d.halted() {
		return
	}
	if d.in.Spec.Paused {
		st.Phase = nodepoolv1.FleetPhasePaused
		st.Message = fmt.Sprintf("paused: no further pool is triggered; %d rolling finish", d.rolling())
		return
	}
	d.advance()
}

// observe updates a triggered pool from what it reports.
func (d *decider) observe(p *nodepoolv1.FleetRolloutPool) {
	switch p.State {
	case nodepoolv1.FleetPoolRolling, nodepoolv1.FleetPoolFailed, nodepoolv1.FleetPoolTakenOver:
	default:
		return
	}
	if p.TriggeredAt == nil {
		return
	}
	obs, ok := d.in.Pools[RefOf(*p)]
	at := p.TriggeredAt.UTC()
	switch {
	case !ok || !obs.Exists:
		d.skip(p, "the pool was deleted")
		return
	case obs.Record == nil && obs.Fleet != "" && obs.Fleet != d.in.Name && p.State != nodepoolv1.FleetPoolTakenOver:
		d.skip(p, fmt.Sprintf("taken over by fleet rollout %s before its rollout started", obs.Fleet))
		return
	}
	takenOver := ""
	if p.State == nodepoolv1.FleetPoolTakenOver {
		takenOver = p.Message
	} else if later, ok := laterRequest(obs, at); ok {
		takenOver = takeOverMessage(obs, later, at)
		d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetPoolTakenOver, "pool %s/%s %s", p.Namespace, p.Name, takenOver)
	}
	if r := obs.Record; r != nil {
		p.Revision = r.Revision
		done := ""
		switch {
		case r.Outcome == OutcomeComplete:
			done = d.carriedOut(r, at)
		case r.Outcome == OutcomeSuperseded && obs.Settled && obs.Unhealthy == nil &&
			(d.in.Spec.Action != nodepoolv1.FleetActionApplyPending || !obs.HasDrift):
			done = fmt.Sprintf("revision %d was superseded by a later rollout, which completed", r.Revision)
		}
		if done != "" || r.Outcome == OutcomeComplete {
			if takenOver != "" {
				done = strings.TrimSuffix(takenOver+"; "+done, "; ")
			}
			p.State, p.Message = nodepoolv1.FleetPoolDone, done
			return
		}
	}
	if obs.Unhealthy != nil {
		p.State, p.Message = nodepoolv1.FleetPoolFailed, fmt.Sprintf("RolloutHealthy is False (%s): %s", obs.Unhealthy.Reason, obs.Unhealthy.Message)
		return
	}
	if takenOver != "" {
		// A person's later request always wins: the fleet never writes its
		// older time back; the pool is done once what the fleet asked holds.
		p.State, p.Message = nodepoolv1.FleetPoolTakenOver, takenOver
		return
	}
	p.State, p.Message = nodepoolv1.FleetPoolRolling, ""
	if obs.Record != nil {
		return
	}
	if obs.Replicas == 0 && obs.Settled && !obs.Updating {
		p.State, p.Message = nodepoolv1.FleetPoolDone, "no machine to replace"
		return
	}
	if held := heldBy(obs); held != "" {
		if d.in.Spec.HeldPools == nodepoolv1.HeldPoolSkip {
			d.skip(p, held)
			return
		}
		p.Message = held
		d.held[RefOf(*p)] = true
	}
	if obs.Fleet != d.in.Name || obs.At != at.Format(time.RFC3339) {
		d.res.Triggers = append(d.res.Triggers, Trigger{Ref: RefOf(*p), At: at, Retry: true})
	}
}

// CarriesOut reports whether a rollout on record carries out a fleet's
// trigger at at, whoever requested it: a forced rollout at or after the
// trigger (the trigger itself, a drift deadline, a newer rolloutAfter, a
// hand apply-pending), or an owner rollout started after it (it replaces
// every machine on the latest payload, pending drift included). A
// rollback returns to an older payload: it carries out nothing.
func CarriesOut(initiator string, forcedAt *time.Time, started, at time.Time) bool {
	if forcedAt != nil {
		return !forcedAt.Before(at)
	}
	return initiator != string(rollout.InitiatorRollback) && !started.Before(at)
}

// carriedOut says what completed the trigger: its own record is done
// without a word; another request's (a drift deadline, a newer
// rolloutAfter, a hand apply-pending) is named.
func (d *decider) carriedOut(r *Record, at time.Time) string {
	if r.Initiator == "" || r.Initiator == nodepoolv1.FleetRolloutInitiator(d.in.Name) && (r.ForcedAt == nil || r.ForcedAt.Equal(at)) {
		return ""
	}
	forced := ""
	if r.ForcedAt != nil {
		forced = ", forced at " + r.ForcedAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("carried out by revision %d (initiator %s%s): no machine older than the trigger is left", r.Revision, r.Initiator, forced)
}

// laterRequest is the pool's apply-pending time when it is after the
// fleet's trigger (a person's later request), whoever wrote it.
func laterRequest(obs Pool, at time.Time) (time.Time, bool) {
	if obs.At == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, obs.At)
	if err != nil || !t.After(at) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// maxReason bounds the operator's reason quoted in a message.
const maxReason = 200

func takeOverMessage(obs Pool, later, at time.Time) string {
	s := fmt.Sprintf("taken over by a later apply-pending (%s) replacing the fleet's (%s)", later.Format(time.RFC3339), at.Format(time.RFC3339))
	if r := obs.OutsideReason; r != "" {
		if len(r) > maxReason {
			r = r[:maxReason] + "…"
		}
		s += fmt.Sprintf(", outside windows: %q", r)
	}
	return s
}

// heldBy says what holds a pool's rollout: its pause, window or exclusion.
func heldBy(obs Pool) string {
	switch {
	case obs.Paused:
		return "the pool is paused (spec.management.pausedUntil)"
	case obs.Held != nil:
		return fmt.Sprintf("held by the pool's maintenance settings (%s): %s", obs.Held.Reason, obs.Held.Message)
	}
	return ""
}

func (d *decider) skip(p *nodepoolv1.FleetRolloutPool, why string) {
	p.State, p.Message = nodepoolv1.FleetPoolSkipped, why
	d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetPoolSkipped, "pool %s/%s skipped: %s", p.Namespace, p.Name, why)
}

// releaseFinished releases the pools whose part is over and that still
// carry this rollout's annotation.
func (d *decider) releaseFinished() {
	for _, p := range d.pools {
		if p.State != nodepoolv1.FleetPoolDone && p.State != nodepoolv1.FleetPoolSkipped {
			continue
		}
		obs, ok := d.in.Pools[RefOf(p)]
		if !ok || !obs.Exists || obs.Fleet != d.in.Name {
			continue
		}
		r := Release{Ref: RefOf(p)}
		if p.TriggeredAt != nil && obs.Record == nil && obs.At == p.TriggeredAt.UTC().Format(time.RFC3339) {
			at := p.TriggeredAt.UTC()
			r.At = &at // it never started: it must not start later
		}
		d.res.Releases = append(d.res.Releases, r)
	}
}

func (d *decider) cancel() {
	st := d.st()
	for i := range d.pools {
		p := &d.pools[i]
		switch p.State {
		case nodepoolv1.FleetPoolPending, nodepoolv1.FleetPoolWaiting:
			p.State, p.Message = nodepoolv1.FleetPoolSkipped, "the fleet rollout was cancelled"
		case nodepoolv1.FleetPoolRolling, nodepoolv1.FleetPoolFailed:
			if obs := d.in.Pools[RefOf(*p)]; obs.Record == nil {
				p.State, p.Message = nodepoolv1.FleetPoolSkipped, "the fleet rollout was cancelled before the pool's rollout started"
			}
		}
	}
	st.Phase, st.CompletedAt = nodepoolv1.FleetPhaseCancelled, d.now()
	st.Message = fmt.Sprintf("cancelled: %d pools rolling finish their rollout", d.rolling())
	d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetRolloutCancelled, "%s", st.Message)
}

// rolling counts the pools triggered whose rollout has not completed.
func (d *decider) rolling() int {
	n := 0
	for _, p := range d.pools {
		if p.State == nodepoolv1.FleetPoolRolling || p.State == nodepoolv1.FleetPoolTakenOver {
			n++
		}
	}
	return n
}

// advance starts waves and pools: the current wave's pools start as slots
// free up; a complete wave lets the next one start once it soaked.
func (d *decider) advance() {
	st := d.st()
	if st.CurrentWave < 1 {
		st.CurrentWave = 1
	}
	soak := time.Duration(0)
	if d.in.Spec.Soak != nil {
		soak = d.in.Spec.Soak.Duration
	}
	for w := int(st.CurrentWave) - 1; w < len(st.Waves); w++ {
		st.CurrentWave = int32(w + 1)
		wave := &st.Waves[w]
		var prev *metav1.Time
		if w > 0 {
			prev = st.Waves[w-1].CompletedAt
		}
		if wave.StartedAt == nil {
			if d.size(w) == 0 {
				// An empty wave (its cumulative count is not above the
				// previous one's) adds no soak.
				at := prev
				if at == nil {
					at = d.now()
				}
				wave.StartedAt, wave.CompletedAt = at, at
				continue
			}
			if prev != nil && soak > 0 {
				if wait := prev.Add(soak).Sub(d.in.Now); wait > 0 {
					st.Phase = nodepoolv1.FleetPhaseSoaking
					st.Message = fmt.Sprintf("wave %d complete; soaking until %s before wave %d starts", w, prev.Add(soak).UTC().Format(time.RFC3339), w+1)
					d.res.RequeueAfter = wait
					return
				}
			}
			wave.StartedAt = d.now()
			d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetWaveStarted, "wave %d of %d started: %d pools", w+1, len(st.Waves), d.size(w))
		}
		d.startPools(int32(w + 1))
		if !d.waveFinished(int32(w + 1)) {
			st.Phase = nodepoolv1.FleetPhaseProgressing
			st.Message = d.progressMessage(int32(w + 1))
			return
		}
		wave.CompletedAt = d.now()
		d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetWaveComplete, "wave %d of %d complete", w+1, len(st.Waves))
	}
	st.Phase, st.CompletedAt = nodepoolv1.FleetPhaseComplete, d.now()
	st.Message = d.completeMessage()
	d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetRolloutComplete, "%s", st.Message)
}

// size is how many pools the wave selected (fixed at the start).
func (d *decider) size(wave int) int { return int(d.st().Waves[wave].Pools) }

// startPools moves the wave's pools from Pending to Waiting and triggers
// the ones that may roll, up to maxConcurrent rolling at once.
func (d *decider) startPools(wave int32) {
	slots := -1 // no limit
	if m := d.in.Spec.MaxConcurrent; m != nil {
		slots = max(0, int(*m)-d.rolling())
	}
	for i := range d.pools {
		p := &d.pools[i]
		if p.Wave != wave {
			continue
		}
		if p.State == nodepoolv1.FleetPoolPending {
			p.State = nodepoolv1.FleetPoolWaiting
		}
		if p.State != nodepoolv1.FleetPoolWaiting {
			continue
		}
		switch kind, why := d.turn(*p, slots); kind {
		case turnSkip:
			d.skip(p, why)
		case turnWait:
			p.Message = why
		default:
			at := poolmath.ForcedNow(d.in.Now)
			mt := metav1.NewTime(at)
			p.State, p.TriggeredAt, p.Message = nodepoolv1.FleetPoolRolling, &mt, ""
			d.res.Triggers = append(d.res.Triggers, Trigger{Ref: RefOf(*p), At: at})
			if slots > 0 {
				slots--
			}
		}
	}
}

type turnKind int

const (
	turnWait turnKind = iota
	turnSkip
	turnStart
)

// turn says what a waiting pool does now, with slots free (-1: no
// limit): it is skipped or waits (and why), or it starts.
func (d *decider) turn(p nodepoolv1.FleetRolloutPool, slots int) (turnKind, string) {
	obs, ok := d.in.Pools[RefOf(p)]
	switch held := heldBy(obs); {
	case !ok || !obs.Exists:
		return turnSkip, "the pool was deleted"
	case obs.Fleet != "" && obs.Fleet != d.in.Name:
		return turnWait, fmt.Sprintf("waiting for fleet rollout %s, which drives the pool", obs.Fleet)
	case d.in.Spec.Action == nodepoolv1.FleetActionApplyPending && !obs.HasDrift && !obs.Updating:
		return turnSkip, "no pending platform drift"
	case obs.Updating:
		return turnWait, "waiting for the pool's rollout in progress to finish"
	case held != "" && d.in.Spec.HeldPools == nodepoolv1.HeldPoolSkip:
		return turnSkip, held
	case held != "":
		d.held[RefOf(p)] = true
		return turnWait, "waiting: " + held
	case slots == 0:
		return turnWait, fmt.Sprintf("waiting for a free slot: %d pools roll at once (maxConcurrent)", *d.in.Spec.MaxConcurrent)
	}
	return turnStart, ""
}

// View is every member's state now, as Decide would see it, without
// deciding anything (kubectl nodepool fleet rollout status): a triggered
// pool from what it reports, a pool of a started wave with what it waits
// for. The observations may lack history records: a pool is then shown
// by what it reports and keeps.
func View(in Input) []nodepoolv1.FleetRolloutPool {
	d := newDecider(in)
	st := d.st()
	switch st.Phase {
	case nodepoolv1.FleetPhaseComplete, nodepoolv1.FleetPhaseCancelled:
		return d.pools
	}
	for i := range d.pools {
		d.observe(&d.pools[i])
	}
	slots := -1
	if m := d.in.Spec.MaxConcurrent; m != nil {
		slots = max(0, int(*m)-d.rolling())
	}
	for i := range d.pools {
		p := &d.pools[i]
		w := int(p.Wave) - 1
		if p.State != nodepoolv1.FleetPoolPending || w < 0 || w >= len(st.Waves) || st.Waves[w].StartedAt == nil {
			continue
		}
		p.State = nodepoolv1.FleetPoolWaiting
		switch kind, why := d.turn(*p, slots); kind {
		case turnStart:
			p.Message = "to be triggered"
			if slots > 0 {
				slots--
			}
		default:
			p.Message = why
		}
	}
	return d.pools
}

// waveFinished: every pool of the wave is done or skipped (or failed,
// when a failure does not stop the rollout).
func (d *decider) waveFinished(wave int32) bool {
	for _, p := range d.pools {
		if p.Wave != wave {
			continue
		}
		switch p.State {
		case nodepoolv1.FleetPoolDone, nodepoolv1.FleetPoolSkipped:
		case nodepoolv1.FleetPoolFailed:
			if stopOnFailure(d.in.Spec) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (d *decider) progressMessage(wave int32) string {
	var rolling, waiting int
	for _, p := range d.pools {
		if p.Wave != wave {
			continue
		}
		switch p.State {
		case nodepoolv1.FleetPoolRolling, nodepoolv1.FleetPoolFailed, nodepoolv1.FleetPoolTakenOver:
			rolling++
		case nodepoolv1.FleetPoolWaiting:
			waiting++
		}
	}
	return fmt.Sprintf("wave %d of %d: %d pools rolling, %d waiting", wave, len(d.st().Waves), rolling, waiting)
}

func (d *decider) completeMessage() string {
	var done, skipped, failed int
	for _, p := range d.pools {
		switch p.State {
		case nodepoolv1.FleetPoolDone:
			done++
		case nodepoolv1.FleetPoolSkipped:
			skipped++
		case nodepoolv1.FleetPoolFailed:
			failed++
		}
	}
	s := fmt.Sprintf("complete: %d pools done, %d skipped", done, skipped)
	if failed > 0 {
		s += fmt.Sprintf(", %d failed", failed)
	}
	return s
}

// conditions sets Progressing and Halted from the phase.
func (d *decider) conditions() {
	st := d.st()
	prog := metav1.Condition{Type: nodepoolv1.FleetConditionProgressing, Status: metav1.ConditionFalse, Reason: string(st.Phase), Message: st.Message, ObservedGeneration: d.in.Generation}
	switch st.Phase {
	case nodepoolv1.FleetPhaseProgressing, nodepoolv1.FleetPhaseSoaking:
		prog.Status = metav1.ConditionTrue
	}
	halted := metav1.Condition{Type: nodepoolv1.FleetConditionHalted, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonAsExpected, ObservedGeneration: d.in.Generation}
	if st.Phase == nodepoolv1.FleetPhaseHalted {
		halted.Status, halted.Reason, halted.Message = metav1.ConditionTrue, string(nodepoolv1.FleetPhaseHalted), st.Message
	}
	for _, c := range []metav1.Condition{prog, halted} {
		c.LastTransitionTime = metav1.NewTime(d.in.Now)
		meta.SetStatusCondition(&st.Conditions, c)
	}
}
