package scenario

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// Fleet is a FleetRollout driven by the real fleet decision, carried out
// as the FleetRollout controller does (status first, then the pools'
// annotations).
type Fleet struct {
	w      *World
	Name   string
	Spec   nodepoolv1.FleetRolloutSpec
	Status nodepoolv1.FleetRolloutStatus
	// Pools are the names it selects (of pools in Namespace); Refs the
	// pools it selects by namespace and name (AddFleetRefs).
	Pools []string
	Refs  []fleet.Ref
	due   time.Time
	watch bool
	// settledSince is when each of its pools was first seen settled
	// while the fleet still waited for it (FleetWavesComplete).
	settledSince map[string]time.Time
	// triggered are the pools seen triggered, and was the phase at the
	// last check (FleetTriggersOnlyWhatItMay).
	triggered map[string]bool
	was       nodepoolv1.FleetRolloutPhase
	// decoded memoizes a member's kept state by its pool and annotation
	// value (fleet.MemberOf decodes it at every look).
	decoded map[string]nodepoolv1.FleetRolloutPool
}

// AddFleet starts a fleet rollout over the named pools.
func (w *World) AddFleet(name string, spec nodepoolv1.FleetRolloutSpec, pools ...string) *Fleet {
	var refs []fleet.Ref
	for _, n := range pools {
		refs = append(refs, fleet.Ref{Namespace: Namespace, Name: n})
	}
	f := w.AddFleetRefs(name, spec, refs)
	f.Pools = pools
	return f
}

// AddFleetRefs starts a fleet rollout over the pools of refs (pools of
// any namespace).
func (w *World) AddFleetRefs(name string, spec nodepoolv1.FleetRolloutSpec, refs []fleet.Ref) *Fleet {
	f := &Fleet{w: w, Name: name, Spec: spec, Refs: refs, due: w.Now, settledSince: map[string]time.Time{}, triggered: map[string]bool{}}
	w.fleets = append(w.fleets, f)
	w.Note("fleet rollout %s started over %v", name, refs)
	return f
}

// Fleets are the world's fleet rollouts.
func (w *World) Fleets() []*Fleet { return append([]*Fleet(nil), w.fleets...) }

func (f *Fleet) terminal() bool {
	return f.Status.Phase == nodepoolv1.FleetPhaseComplete || f.Status.Phase == nodepoolv1.FleetPhaseCancelled
}

func (f *Fleet) reconcile() {
	w := f.w
	f.watch = false
	if f.terminal() {
		f.due = time.Time{}
		return
	}
	key := nodepoolv1.FleetRolloutPoolAnnotation(f.Name)
	if f.Status.StartedAt == nil {
		// As the controller's start: every selected pool keeps its wave
		// in its annotation, then the status records the start.
		var refs []fleet.Ref
		for _, r := range f.Refs {
			if w.PoolIn(r.Namespace, r.Name) != nil {
				refs = append(refs, r)
			}
		}
		st, members := fleet.Start(refs, f.Spec.Waves, metav1.NewTime(w.Now))
		for _, m := range members {
			if p := w.PoolIn(m.Namespace, m.Name); p != nil {
				p.setAnnotation(key, fleet.Encode(m))
			}
		}
		f.Status = st
		f.due = w.Now.Add(time.Second) // the controller looks again once its cache has the pools' states
		return
	}
	members := f.members()
	pools := map[fleet.Ref]fleet.Pool{}
	for _, sp := range members {
		ref := fleet.RefOf(sp)
		p := w.PoolIn(sp.Namespace, sp.Name)
		obs := fleet.Observe(p.Obj, w.Now)
		if obs.Fleet != "" && obs.Fleet != f.Name && !w.drives(obs.Fleet) {
			obs.Fleet = ""
		}
		over := sp.State == nodepoolv1.FleetPoolDone || sp.State == nodepoolv1.FleetPoolSkipped
		if sp.TriggeredAt != nil && (!over || obs.Fleet == f.Name) {
			// As the controller's record(): the newest forced rollout at
			// or after the trigger, whoever asked for it.
			for _, r := range p.History {
				if !fleet.CarriesOut(string(r.Initiator), r.ForcedAt, r.Started, sp.TriggeredAt.Time) {
					continue
				}
				if obs.Record == nil || r.Revision > obs.Record.Revision {
					var at *time.Time
					if r.ForcedAt != nil {
						t := r.ForcedAt.UTC()
						at = &t
					}
					obs.Record = &fleet.Record{Revision: r.Revision, Outcome: r.Outcome, Initiator: string(r.Initiator), ForcedAt: at}
				}
			}
		}
		pools[ref] = obs
	}
	res := fleet.Decide(fleet.Input{Name: f.Name, Spec: f.Spec, Status: f.Status, Generation: 1, Members: members, Pools: pools, Now: w.Now})
	f.Status = res.Status
	for _, st := range res.Store {
		if p := w.PoolIn(st.Namespace, st.Name); p != nil {
			p.setAnnotation(key, st.Value)
		}
	}
	for _, t := range res.Triggers {
		if p := w.PoolIn(t.Namespace, t.Name); p != nil {
			p.setAnnotation(nodepoolv1.AnnotationApplyPending, t.At.UTC().Format(time.RFC3339))
			p.setAnnotation(nodepoolv1.AnnotationFleetRollout, f.Name)
			p.touch()
			if !t.Retry {
				w.Note("fleet %s triggered %s at %s", f.Name, t.Name, t.At.UTC().Format(time.RFC3339))
			}
		}
	}
	for _, r := range res.Releases {
		p := w.PoolIn(r.Namespace, r.Name)
		if p == nil || p.Annotation(nodepoolv1.AnnotationFleetRollout) != f.Name {
			continue
		}
		p.setAnnotation(nodepoolv1.AnnotationFleetRollout, "")
		if r.At != nil && p.Annotation(nodepoolv1.AnnotationApplyPending) == r.At.UTC().Format(time.RFC3339) {
			p.setAnnotation(nodepoolv1.AnnotationApplyPending, "")
		}
		p.touch()
	}
	for _, e := range res.Events {
		w.Note("fleet %s: %s", f.Name, e.Message)
	}
	f.due = time.Time{}
	if !f.terminal() {
		after := 10 * time.Hour
		if res.RequeueAfter > 0 && res.RequeueAfter < after {
			after = res.RequeueAfter
		}
		f.due = w.Now.Add(after)
		if len(res.Store)+len(res.Triggers)+len(res.Releases) > 0 {
			f.wake() // its own writes to the pools are pool events too
		}
	}
	// The fleet controller watches the pools: a change of what it reads
	// of one (fleet.FactsChanged, or its history) wakes it a batch later
	// (fleet.Batch, wake), a person's action at once, else its requeue.
}

// maxFleetLook bounds the batch of a forecast's fleet rollout
// (World.FleetLookPerPool).
const maxFleetLook = 15 * time.Minute

// wake is a watch event of one of its pools: the controller batches them
// (fleet.Batch of its members) and then looks once.
func (f *Fleet) wake() {
	if f.terminal() {
		return
	}
	batch := fleet.Batch(len(f.Refs))
	if per := f.w.FleetLookPerPool; per > 0 && f.Spec.MaxConcurrent == nil {
		batch = max(batch, min(maxFleetLook, time.Duration(len(f.Refs))*per))
	}
	at := f.w.Now.Add(batch)
	if f.due.IsZero() || at.Before(f.due) {
		f.due = at
	}
}

// poolFacts is what a fleet rollout reads of a pool, taken before a
// reconcile of the pool: its object and its history's records.
type poolFacts struct {
	obj     *nodepoolv1.NodePool
	history string
}

// fleetFacts is what the world's fleet rollouts read of the pool now (nil
// when no fleet rollout is under way: nothing to wake).
func (w *World) fleetFacts(p *Pool) *poolFacts {
	for _, f := range w.fleets {
		if !f.terminal() {
			return &poolFacts{obj: p.Obj.DeepCopy(), history: historyFacts(p.History)}
		}
	}
	return nil
}

// changed reports whether a fleet rollout reads something new of the pool
// (the controller's watch of pools and of their records).
func (pf *poolFacts) changed(p *Pool) bool {
	return fleet.FactsChanged(pf.obj, p.Obj) || pf.history != historyFacts(p.History)
}

// historyFacts is what can change of the pool's records (what a record
// sets out to do is written once, at its start): which there are, each
// one's outcome and completion, and the state kept on it.
func historyFacts(records []Record) string {
	var b strings.Builder
	for _, r := range records {
		fmt.Fprintf(&b, "%d %s", r.Revision, r.Outcome)
		if r.Completed != nil {
			fmt.Fprintf(&b, " %d", r.Completed.UnixNano())
		}
		fmt.Fprintf(&b, " %v;", r.State) // fmt prints a map's keys sorted
	}
	return b.String()
}

// members are the fleet rollout's pools with the state each keeps in its
// annotation, in the order of f.Refs (a pool gone is no member).
func (f *Fleet) members() []nodepoolv1.FleetRolloutPool {
	var out []nodepoolv1.FleetRolloutPool
	for _, r := range f.Refs {
		p := f.w.PoolIn(r.Namespace, r.Name)
		if p == nil {
			continue
		}
		v, ok := p.Obj.Annotations[nodepoolv1.FleetRolloutPoolAnnotation(f.Name)]
		if !ok {
			continue
		}
		key := r.Namespace + "/" + r.Name + "=" + v
		m, ok := f.decoded[key]
		if !ok {
			var err error
			if m, err = fleet.Decode(p.Obj.Namespace, p.Obj.Name, v); err != nil {
				continue
			}
			if f.decoded == nil || len(f.decoded) > 4096+2*len(f.Refs) {
				f.decoded = map[string]nodepoolv1.FleetRolloutPool{}
			}
			f.decoded[key] = m
		}
		out = append(out, *m.DeepCopy())
	}
	return out
}

// view is every member's state as `kubectl nodepool fleet rollout status`
// shows it (the fleet decision's own view).
func (f *Fleet) view() []nodepoolv1.FleetRolloutPool {
	pools := map[fleet.Ref]fleet.Pool{}
	members := f.members()
	for _, m := range members {
		pools[fleet.RefOf(m)] = fleet.Observe(f.w.PoolIn(m.Namespace, m.Name).Obj, f.w.Now)
	}
	return fleet.View(fleet.Input{Name: f.Name, Spec: f.Spec, Status: f.Status, Generation: 1, Members: members, Pools: pools, Now: f.w.Now})
}

func (w *World) drives(name string) bool {
	for _, f := range w.fleets {
		if f.Name == name {
			return !f.terminal()
		}
	}
	return false
}

// State is a one-line summary of the fleet rollout.
func (f *Fleet) State() string {
	s := fmt.Sprintf("fleet %s: %s wave %d", f.Name, f.Status.Phase, f.Status.CurrentWave)
	for _, p := range f.view() {
		s += fmt.Sprintf(" %s=%s", p.Name, p.State)
	}
	return s
}

// FleetWavesComplete: a fleet rollout's pool that settled (nothing
// rolling, every machine up to date, no drift left for ApplyPending) for
// over two hours is no longer waited for.
func (w *World) checkFleets() []error {
	if _, off := w.opts["FleetWavesComplete"]; off || w.Quiet {
		return nil
	}
	var errs []error
	views := make([][]nodepoolv1.FleetRolloutPool, len(w.fleets)) // each fleet's view once a step
	for i, f := range w.fleets {
		views[i] = f.view()
		errs = append(errs, f.checkTriggers(views[i])...)
	}
	for i, f := range w.fleets {
		if f.terminal() || f.Spec.Paused {
			continue
		}
		for _, sp := range views[i] {
			p := w.PoolIn(sp.Namespace, sp.Name)
			if p == nil || sp.State != nodepoolv1.FleetPoolRolling || sp.TriggeredAt == nil {
				delete(f.settledSince, sp.Name)
				continue
			}
			obs := fleet.Observe(p.Obj, w.Now)
			done := obs.Settled && !(f.Spec.Action == nodepoolv1.FleetActionApplyPending && obs.HasDrift) && obs.Unhealthy == nil
			older := false
			for _, m := range p.Machines {
				if m.Created.Before(sp.TriggeredAt.Time) {
					older = true
				}
			}
			if !done || older {
				delete(f.settledSince, sp.Name)
				continue
			}
			since, ok := f.settledSince[sp.Name]
			if !ok {
				f.settledSince[sp.Name] = w.Now
				continue
			}
			if w.Now.Sub(since) > 2*time.Hour {
				errs = append(errs, fmt.Errorf("FleetWavesComplete at %s: fleet %s still waits for pool %s, which has carried out its trigger (%s) and settled since %s",
					w.Now.UTC().Format(time.RFC3339), f.Name, sp.Name, sp.TriggeredAt.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339)))
				delete(f.settledSince, sp.Name)
			}
		}
	}
	return errs
}

// checkTriggers is FleetTriggersOnlyWhatItMay: a fleet rollout triggers
// no pool while it is halted (or was at the last look), paused or
// cancelled; never more than maxConcurrent of its pools roll at once;
// and a wave's first trigger comes no sooner than the soak after the
// previous wave completed.
func (f *Fleet) checkTriggers(view []nodepoolv1.FleetRolloutPool) []error {
	w := f.w
	if _, off := w.opts["FleetTriggersOnlyWhatItMay"]; off || w.Quiet {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("FleetTriggersOnlyWhatItMay at %s: fleet %s: %s", w.Now.UTC().Format(time.RFC3339), f.Name, fmt.Sprintf(format, args...)))
	}
	rolling := int32(0)
	for _, sp := range view {
		if sp.State == nodepoolv1.FleetPoolRolling {
			rolling++
		}
		if sp.TriggeredAt == nil || f.triggered[sp.Name] {
			continue
		}
		f.triggered[sp.Name] = true
		switch {
		case f.was == nodepoolv1.FleetPhaseHalted:
			fail("pool %s triggered while the rollout was halted", sp.Name)
		case f.Spec.Paused || f.Spec.Cancelled:
			fail("pool %s triggered while the rollout is paused or cancelled", sp.Name)
		}
		if soak := f.Spec.Soak; soak != nil && sp.Wave > 1 && int(sp.Wave-1) <= len(f.Status.Waves) {
			prev := f.Status.Waves[sp.Wave-2]
			if prev.CompletedAt == nil {
				fail("pool %s of wave %d triggered before wave %d completed", sp.Name, sp.Wave, prev.Wave)
			} else if sp.TriggeredAt.Time.Before(prev.CompletedAt.Add(soak.Duration).Truncate(time.Second)) {
				fail("pool %s of wave %d triggered at %s, before wave %d's soak of %s ended", sp.Name, sp.Wave,
					sp.TriggeredAt.UTC().Format(time.RFC3339), prev.Wave, soak.Duration)
			}
		}
	}
	if m := f.Spec.MaxConcurrent; m != nil && rolling > *m {
		fail("%d pools rolling, more than maxConcurrent %d", rolling, *m)
	}
	f.was = f.Status.Phase
	return errs
}
