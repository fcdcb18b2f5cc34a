package rollout

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// A rollout is its record: the revision of the pool's history the
// controller wrote when it started. What the engine keeps about a rollout
// while it lasts (the health gate's halt, a drain halt, the payload a
// forced rollout returns to, the rollout a rollback rolled back) is kept
// on that record, under RecordKeys, and nowhere else: a new rollout, even
// of the same change, starts with a new record and so starts clean; the
// pool's annotations are only people's requests. Only a rollback is
// carried on: the forced rollouts that follow it must still boot the
// revision it returned to (carryOn).
//
// An older nodepool kept these keys as annotations of the pool. They are
// read as the current record's until moved: the plan writes them on the
// record and removes them from the pool (moveOlderRecords).

// RecordKeys are the keys the engine keeps on the current rollout's record.
var RecordKeys = []string{
	nodepoolv1.AnnotationHalted,
	nodepoolv1.AnnotationDrainHalted,
	nodepoolv1.AnnotationForcedFrom,
	nodepoolv1.AnnotationRolledBack,
}

// recorded is what the current rollout's record holds under key: the
// record's value, or the pool's annotation an older nodepool wrote
// (moved by this reconcile's plan).
func recorded(in Input, key string) string {
	if in.Current != nil {
		if v, ok := in.Current.State[key]; ok {
			return v
		}
	}
	return annotation(in.Pool, key)
}

// record sets key on the current rollout's record ("" removes it).
func (p *Plan) record(key, value string) {
	if p.RecordState == nil {
		p.RecordState = map[string]string{}
	}
	p.RecordState[key] = value
}

// recordedValue is what the plan leaves on the record under key, and
// whether the plan writes it.
func (p *Plan) recordedValue(key string) (string, bool) {
	v, ok := p.RecordState[key]
	return v, ok
}

// withState returns in whose current record holds state on top of what
// it held: what the engine reads after a request it carried out. The
// record stays the rollout it is (its hash, start and outcome): a resumed
// configuration applied again is still on trial from its start (seed 8910).
func withState(in Input, state map[string]string) Input {
	var cur CurrentRollout
	if in.Current != nil {
		cur = *in.Current
	}
	held := make(map[string]string, len(cur.State)+len(state))
	maps.Copy(held, cur.State)
	maps.Copy(held, state) // "" is read as removed, not as an older pool annotation
	cur.State = held
	in.Current = &cur
	return in
}

// resumeRequested carries out a resume request (AnnotationResume): when it
// names the current rollout, its health halt ends and its drain halt is
// excused (drainResumed); a request naming another rollout, one that
// ended, resumes nothing. Either way the request is removed. It returns
// the input as the rest of the engine reads it.
func resumeRequested(in Input, p *Plan) Input {
	v := annotation(in.Pool, nodepoolv1.AnnotationResume)
	if v == "" {
		return in
	}
	p.Annotations[nodepoolv1.AnnotationResume] = ""
	current := int64(0)
	if in.Current != nil {
		current = in.Current.Revision
	}
	rev, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || rev <= 0:
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventResumeIgnored,
			Message: fmt.Sprintf("annotation %s=%q resumes nothing: its value must be the revision of the rollout to resume (status.rollout.revision, %d)", nodepoolv1.AnnotationResume, v, current)})
		return in
	case rev != current:
		p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventResumeIgnored,
			Message: fmt.Sprintf("the resume of revision %d resumes nothing: the pool's current rollout is revision %d", rev, current)})
		return in
	}
	state := map[string]string{}
	if recorded(in, nodepoolv1.AnnotationHalted) != "" {
		state[nodepoolv1.AnnotationHalted] = ""
	}
	if d := recorded(in, nodepoolv1.AnnotationDrainHalted); d != "" && !strings.HasSuffix(d, drainResumed) {
		state[nodepoolv1.AnnotationDrainHalted] = d + drainResumed
	}
	if len(state) == 0 {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventResumeIgnored,
			Message: fmt.Sprintf("revision %d has no halt to resume", rev)})
		return in
	}
	p.resumed = state
	for k, v := range state {
		p.record(k, v)
	}
	p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutResumed,
		Message: fmt.Sprintf("revision %d resumed on request", rev)})
	return withState(in, state)
}

// moveOlderRecords moves what an older nodepool kept as pool annotations
// onto the current record (or the record this plan starts), unless the
// plan writes the key itself, and removes them from the pool.
func moveOlderRecords(in Input, p *Plan) {
	if in.Current == nil && p.Record == nil {
		return // no record to move them to yet
	}
	for _, k := range RecordKeys {
		v := annotation(in.Pool, k)
		if v == "" {
			continue
		}
		p.Annotations[k] = ""
		if in.Current != nil {
			if _, ok := in.Current.State[k]; ok {
				continue // the record holds it already
			}
		}
		if _, ok := p.recordedValue(k); !ok && p.Record == nil {
			p.record(k, v)
		}
	}
}

// carryOn starts the state of the record a plan starts (Record): a new
// rollout starts clean, but a rollback that still holds is carried on, so
// that the forced rollouts after it boot the revision it returned to.
// What a resume request wrote was for the rollout that ends (seed 3549:
// its excused drain halt went on the undo's new record).
func carryOn(in Input, p *Plan) {
	if p.Record == nil {
		return
	}
	for k, v := range p.resumed {
		if p.RecordState[k] == v { // not written since for the new rollout
			delete(p.RecordState, k)
		}
	}
	if _, ok := p.recordedValue(nodepoolv1.AnnotationRolledBack); ok {
		return
	}
	if rollbackHolds(in) {
		p.record(nodepoolv1.AnnotationRolledBack, recorded(in, nodepoolv1.AnnotationRolledBack))
	}
}

// keepWithoutRecord keeps the state of a pool that has no record yet (a
// pool whose records a cache does not show yet) where an older nodepool
// kept it, on the pool's annotations: moveOlderRecords moves it once the
// record is there.
func keepWithoutRecord(in Input, p *Plan) {
	if in.Current != nil || p.Record != nil {
		return
	}
	for k, v := range p.RecordState {
		p.Annotations[k] = v
	}
	p.RecordState = nil
}
