package scenario

import (
	"fmt"
	"maps"
	"reflect"
	"sort"
	"time"

	"nodepool.dev/nodepool/internal/rollout"
)

// Action is something scripted that happens at a time: an owner edit, a
// platform bump, a person's command, a controller restart.
type Action struct {
	At   time.Time
	What string
	Do   func(w *World)
	seq  int
}

// At schedules an action at a time (actions at the same time run in the
// order they were scheduled).
func (w *World) At(at time.Time, what string, do func(w *World)) {
	w.seq++
	w.script = append(w.script, Action{At: at.UTC(), What: what, Do: do, seq: w.seq})
	sort.SliceStable(w.script, func(i, j int) bool {
		if !w.script[i].At.Equal(w.script[j].At) {
			return w.script[i].At.Before(w.script[j].At)
		}
		return w.script[i].seq < w.script[j].seq
	})
}

// After schedules an action a duration after now.
func (w *World) After(d time.Duration, what string, do func(w *World)) { w.At(w.Now.Add(d), what, do) }

// Restart drops every bit of the controller's memory: the next input of
// every pool is rebuilt from the observed objects only (it always is; a
// restart also forgets the last plans and reconciles every pool at once).
func (w *World) Restart() {
	for _, p := range w.pools {
		p.lastPlan, p.rendered = nil, nil
		p.due = w.Now
		p.touch()
		// Its connection to the pool's Cluster comes up after its first
		// look at the pool, as a real controller's ClusterCache does.
		p.nodesUnread = true
		p.staleUserData = nil // a new cache lists what exists
	}
	for _, f := range w.fleets {
		f.due = w.Now
	}
}

// Run steps the world until end (or a violation, unless KeepGoing).
func (w *World) Run(end time.Time) error {
	// What a test changed of a pool between runs is seen at once.
	for _, p := range w.pools {
		w.schedule(p, w.Now)
	}
	for !w.Now.After(end) {
		if err := w.Step(); err != nil && !w.KeepGoing {
			return err
		}
		if w.Done != nil && w.Done(w) {
			break
		}
		next := w.next()
		if next.IsZero() || next.After(end) {
			w.Now = end
			break
		}
		w.Now = next
		w.steps++
		if w.steps > w.StepLimit {
			return fmt.Errorf("scenario: more than %d steps by %s: the model busy-loops", w.StepLimit, w.Now.Format(time.RFC3339))
		}
	}
	if len(w.Violations) > 0 {
		return w.Violations[0]
	}
	return nil
}

// RunFor runs for a duration from now.
func (w *World) RunFor(d time.Duration) error { return w.Run(w.Now.Add(d)) }

// Step runs everything due now: scripted actions, Cluster API, the
// MachineHealthCheck, node agents, fleet rollouts, and the reconcile of
// every pool due or whose watched objects changed; then the invariants.
func (w *World) Step() error {
	for len(w.script) > 0 && !w.script[0].At.After(w.Now) {
		a := w.script[0]
		w.script = w.script[1:]
		w.Note("%s", a.What)
		w.countAction(a.What) // forecast_invariant.go
		a.Do(w)
		for _, p := range w.pools {
			p.touch()
		}
		for _, f := range w.fleets {
			f.watch = true
		}
	}
	var errs []error
	// The pools due now run in every round: Cluster API, the agents and
	// the controller may each have more for them once the others acted.
	// A pool a fleet rollout touches in a round joins the next.
	w.stepping = w.due(w.stepping)
	for round := 0; round < 5; round++ {
		busy := false
		for _, p := range w.stepping {
			if p.ClusterPaused {
				if c, _ := p.runAgents(); c {
					p.touch()
				}
				continue
			}
			if c, _ := p.remediate(false); c {
				p.touch()
			}
			if c, _ := p.runAgents(); c {
				p.touch()
			}
			if p.reconcileCAPI() {
				p.touch()
			}
			if p.nodeEvents() {
				p.touch()
			}
		}
		for _, f := range w.fleets {
			if (!f.due.IsZero() && !f.due.After(w.Now)) || f.watch {
				f.reconcile()
			}
		}
		w.stepping = w.join(w.stepping)
		for _, p := range w.stepping {
			if p.ClusterPaused || !p.watch && (p.due.IsZero() || p.due.After(w.Now)) {
				continue
			}
			busy = true
			p.watch = false
			before := w.fleetFacts(p)
			errs = append(errs, p.reconcile()...)
			if p.reconcileCAPI() {
				p.touch()
			}
			if before != nil && before.changed(p) {
				for _, f := range w.fleets {
					f.wake()
				}
			}
		}
		if !busy {
			break
		}
		anyWatch := false
		for _, p := range w.stepping {
			anyWatch = anyWatch || p.watch
		}
		if !anyWatch {
			break
		}
	}
	w.settle()
	errs = append(errs, w.checkFleets()...)
	w.row()
	for _, e := range errs {
		w.Violations = append(w.Violations, e)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// ownWritesLimit is how long the controller waits for its cache to show
// its own writes (internal/controller/own_writes.go's staleCacheLimit).
const ownWritesLimit = 30 * time.Second

// reconcile is one reconcile of the pool: observe, decide, apply, check.
func (p *Pool) reconcile() []error {
	if p.staleUserData != nil && !p.w.Now.Before(p.staleUntil) {
		p.staleUserData = nil // the cache caught up
	}
	if p.staleUserData != nil && !p.w.DecideOnLaggingSecrets && p.w.Now.Sub(p.staleSince) <= ownWritesLimit {
		// The cache has not shown the controller's own last write to the
		// pool's user-data: it decides nothing and looks again a second
		// later (internal/controller/own_writes.go).
		p.w.Note("%s: the controller's cache is behind its own write to the user-data: nothing decided", p.Name)
		p.due = p.w.Now.Add(time.Second)
		return nil
	}
	in := p.Observe()
	if p.staleUserData != nil {
		// The Secret informer delivers the writes in order: the tokens
		// (written first) as written, the user-data (rewritten last) as
		// it was.
		in.UserData = p.staleUserData
	}
	p.nodesUnread = false
	p.looks++
	plan := rollout.Decide(in)
	var userData map[string]rollout.UserData
	if p.w.SecretsLag != nil {
		userData = maps.Clone(p.UserData) // as a lagging cache would still show it
	}
	if p.apply(in, plan) {
		// The controller stopped right after writing the
		// MachineDeployment; it restarts and looks at every pool again.
		p.w.CrashAfterMachineDeployment = false
		p.w.Note("%s: the controller stopped right after writing the MachineDeployment", p.Name)
		p.w.Restart()
		return nil
	}
	if p.staleUserData == nil && p.w.SecretsLag != nil && !reflect.DeepEqual(userData, p.UserData) {
		if lag := p.w.SecretsLag(); lag > 0 {
			p.staleUserData, p.staleSince, p.staleUntil = userData, p.w.Now, p.w.Now.Add(lag)
		}
	}
	p.lastPlan = &plan
	if a := plan.Decision.Action; a != rollout.ActionNone && p.stepAction == "" {
		p.stepAction = a
	}
	after := plan.RequeueAfter
	if p.w.NoPolls {
		after = plan.DueAfter
	}
	p.due = p.w.Now.Add(after)
	if after == 0 {
		p.due = time.Time{}
	}
	return p.w.check(p, in, plan)
}

// nodeEvents reports whether a node registered, turned Ready or NotReady
// just now (a watch event of the controller).
func (p *Pool) nodeEvents() bool {
	now := p.w.Now
	for _, m := range p.Machines {
		if m.NodeAt.Equal(now) || m.UnhealthyAt.Equal(now) || m.AgentAt.Equal(now) {
			return true
		}
	}
	return false
}

// next is the time of the next event: a scripted action, a pool's
// requeue, a node registering or turning unhealthy, an agent finishing, a
// MachineHealthCheck timeout, a fleet rollout's requeue.
func (w *World) next() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(w.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if len(w.script) > 0 {
		consider(w.script[0].At)
	}
	for _, p := range w.touched {
		if p.watch && !p.ClusterPaused {
			consider(w.Now.Add(time.Second))
		}
	}
	if len(w.queue) > 0 {
		consider(w.queue[0].at)
	}
	for _, f := range w.fleets {
		consider(f.due)
		if f.watch && !f.terminal() {
			consider(w.Now.Add(time.Second)) // a pool it watches changed
		}
	}
	return next
}
