package scenario

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// DefaultForecastHorizon is how far a forecast looks ahead: a pool that
// has not run the new payload by then never will without action.
const DefaultForecastHorizon = 60 * 24 * time.Hour

// ForecastPool is one pool as the cluster holds it, for a forecast.
type ForecastPool struct {
	// Pool is the NodePool as stored: spec (policies, windows, deadline,
	// health gate, pause), labels, annotations (the requests of people and
	// fleet rollouts: apply-pending, outside-windows, fleet-rollout) and
	// status (where its rollout stands: a halt, a forced rollout that
	// waits).
	Pool *nodepoolv1.NodePool
	// Machines is how many machines it runs (its desired count).
	Machines int32
	// Change lists the platform components whose latest digest differs
	// from what its nodes run once the change is applied, with when the
	// nodes first differed (its pending drift's since; zero: now). Empty
	// when the change does not reach the pool.
	Change []ForecastChange
	// Past are its finished rollouts, newest first, as its history
	// records them (listing.RecentRollouts): what its durations are
	// predicted from.
	Past []poolmath.PastRollout
}

// HaltOf is why the pool's rollout cannot go on without a person, as the
// controller published where it stands (status.rollout): halted (by its
// health gate, a failed forced rollout or a drain under onTimeout Halt),
// rolling back, or a forced rollout such a halt holds. "" when none of
// them, or when no standing is published. A forecast reads it (fleet's
// RUNS-LATEST, fleet forecast, a FleetRollout's predictedCompletion), not
// the reason of a condition: every halt is the Halted phase.
func HaltOf(p *nodepoolv1.NodePool) string {
	s := p.Status.Rollout
	if s == nil {
		return ""
	}
	switch {
	case s.Phase == nodepoolv1.RolloutPhaseHalted:
		return orWords(s.Message, "its rollout is halted")
	case s.Phase == nodepoolv1.RolloutPhaseRollingBack:
		return "its health gate rolls it back" + colonThen(s.Message)
	case s.Held != nil && s.Held.By == string(rollout.HeldByHealthGate):
		return orWords(s.Held.Message, "a halted rollout holds its forced rollout")
	}
	return ""
}

func orWords(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func colonThen(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// forcedWaits reports that the pool's standing has a forced rollout
// (apply-pending, restart, a fleet rollout's, the Rollout policy's or the
// drift deadline's) waiting or rolling.
func forcedWaits(p *nodepoolv1.NodePool) bool {
	s := p.Status.Rollout
	if s == nil || !slices.Contains(s.Changing, "Forced") {
		return false
	}
	return s.Phase == nodepoolv1.RolloutPhaseHeld || s.Phase == nodepoolv1.RolloutPhaseRolling
}

// requests are the forced rollouts people (and fleet rollouts) asked of
// the pool that the model carries out from now: the apply-pending
// annotation (with the fleet rollout that wrote it) and rolloutAfter, and
// the outside-windows annotations of the one they name. A request to come
// keeps its time. Of those past, the newest (the one the engine carries
// out: an older one is done with it) is asked again at now while the
// pool's standing says a forced rollout waits or rolls — the model's
// machines, all made before now, are then older than it, as the pool's
// are —; otherwise it was carried out, and the model leaves it out.
func requests(p *nodepoolv1.NodePool, now time.Time) (annotations map[string]string, rolloutAfter *metav1.Time) {
	var applyPending, restart time.Time
	if v := p.Annotations[nodepoolv1.AnnotationApplyPending]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			applyPending = poolmath.RequestTime(t)
		}
	}
	if ra := p.Spec.Management.RolloutAfter; ra != nil && !ra.IsZero() {
		restart = poolmath.RequestTime(ra.Time)
	}
	var newestPast time.Time
	for _, t := range []time.Time{applyPending, restart} {
		if !t.IsZero() && !t.After(now) && t.After(newestPast) {
			newestPast = t
		}
	}
	waits := forcedWaits(p)
	place := func(t time.Time) (time.Time, bool) {
		switch {
		case t.IsZero():
			return t, false
		case t.After(now):
			return t, true
		case waits && t.Equal(newestPast):
			return now, true
		}
		return time.Time{}, false
	}
	annotations = map[string]string{}
	outside := func(asked, at time.Time) {
		v := p.Annotations[nodepoolv1.AnnotationOutsideWindowsAt]
		t, err := time.Parse(time.RFC3339, v)
		if v == "" || err != nil || !poolmath.RequestTime(t).Equal(asked) {
			return
		}
		annotations[nodepoolv1.AnnotationOutsideWindowsAt] = at.Format(time.RFC3339)
		if r := p.Annotations[nodepoolv1.AnnotationOutsideWindowsReason]; r != "" {
			annotations[nodepoolv1.AnnotationOutsideWindowsReason] = r
		}
	}
	if at, ok := place(restart); ok {
		rolloutAfter = &metav1.Time{Time: at}
		outside(restart, at)
	}
	if at, ok := place(applyPending); ok {
		annotations[nodepoolv1.AnnotationApplyPending] = at.Format(time.RFC3339)
		if f := p.Annotations[nodepoolv1.AnnotationFleetRollout]; f != "" {
			annotations[nodepoolv1.AnnotationFleetRollout] = f
		}
		outside(applyPending, at)
	}
	return annotations, rolloutAfter
}

// ForecastChange is one platform component the change alters for a pool.
type ForecastChange struct {
	Component inputs.Component
	Since     time.Time
}

// ForecastFleet is a FleetRollout the forecast carries out over the pools.
type ForecastFleet struct {
	Name  string
	Spec  nodepoolv1.FleetRolloutSpec
	Pools []fleet.Ref
	// Status and Members are, for a fleet rollout under way, its status
	// and each pool's state (its annotation): the forecast goes on from
	// there. A pool triggered whose rollout has not completed is taken as
	// triggered now (it errs long by what that rollout has done).
	Status  *nodepoolv1.FleetRolloutStatus
	Members map[fleet.Ref]nodepoolv1.FleetRolloutPool
}

// ChangesOf are the forecast changes of a pool's pending platform drift
// rows (status.pendingManagementChanges, or a plan's).
func ChangesOf(rows []nodepoolv1.PendingManagementChange) []ForecastChange {
	var out []ForecastChange
	for _, r := range rows {
		c, err := inputs.ParseComponent(r.Component)
		if err != nil || c.IsRollout() {
			continue
		}
		out = append(out, ForecastChange{Component: c, Since: r.Since.Time})
	}
	return out
}

// ForecastInput is what a forecast runs from.
type ForecastInput struct {
	Now time.Time
	// Horizon is how far it looks (0: DefaultForecastHorizon).
	Horizon  time.Duration
	Settings rollout.Settings
	Pools    []ForecastPool
	Fleet    *ForecastFleet
}

// When a pool's nodes run the new payload (PoolForecast.When).
const (
	WhenNoChange  = "no-change"     // the change does not reach it
	WhenNow       = "now"           // its rollout starts at once
	WhenWindow    = "window"        // at its next maintenance window
	WhenDeadline  = "deadline"      // when its drift deadline is reached
	WhenPause     = "pause-end"     // when its pause ends
	WhenExclusion = "exclusion-end" // when a maintenance exclusion ends
	WhenFleet     = "fleet"         // when its fleet rollout wave triggers it
	WhenNever     = "never"         // not without action
)

// PoolForecast is what a forecast says of one pool.
type PoolForecast struct {
	Namespace string
	Name      string
	Machines  int32
	// Components are the platform components the change alters, each
	// with whether (and how) it reaches the running nodes.
	Components []ComponentForecast
	// Rolls is set when the change replaces (or updates) its nodes at all.
	Rolls bool
	When  string
	// Start and End are when its rollout of the new payload starts and
	// completes in the simulation (nil: not within the horizon).
	Start, End *time.Time
	// EndLow and EndHigh are Start plus the fastest and slowest
	// predicted duration (and Held): how sure the end is. End is Start
	// plus the likely duration (Prediction.Likely) and Held: it lies
	// between them.
	EndLow, EndHigh *time.Time
	// Held is how much longer than predicted the rollout took in the
	// model because something held it once it started (a window that
	// closed, a pause); 0 when it waited for nothing.
	Held       time.Duration
	Prediction poolmath.Prediction
	// Basis names the pools like it a young pool's prediction is from
	// (Prediction.Peers > 0): "4 pools like it (DockerMachineTemplate of
	// infrastructure.cluster.x-k8s.io, Replace, 3–10 machines)".
	Basis string
	// Holds say what holds it now (paused, an exclusion, outside its
	// windows, halted).
	Holds []string
	// Reason says why it never converges ("" when it does).
	Reason string
	// Wave is its fleet rollout wave (0: none).
	Wave int32
	// NodeTimes are when each of its nodes runs the new payload, in order.
	NodeTimes []time.Time
}

// ComponentForecast is one changed component of a pool.
type ComponentForecast struct {
	Component string
	Delivery  string
	// Rolls: the running nodes get it by a rollout; else How says when
	// they do (new nodes only, at the next owner change).
	Rolls bool
	How   string
}

// WaveForecast is when one wave of the fleet rollout starts and ends.
type WaveForecast struct {
	Wave       int32
	Pools      int32
	Start, End *time.Time
}

// Forecast is what the forecast says of the whole fleet.
type Forecast struct {
	Now     time.Time
	Horizon time.Duration
	Pools   []PoolForecast
	Waves   []WaveForecast
	// FleetEnd is when the fleet rollout completes (nil: not within the
	// horizon, or no fleet rollout).
	FleetEnd *time.Time
	// PoolsAt and NodesAt are when 50%, 90% and 100% of the pools (of
	// their nodes) run the new payload, keyed by percent; nil: never
	// without action.
	PoolsAt, NodesAt map[int]*time.Time
	// Never are the pools that never run it without action.
	Never []string
	// Notes say where the forecast may differ from what happens.
	Notes []string
}

// Percents the summary reports.
var Percents = []int{50, 90, 100}

// The model's components a real one is carried as: the engine treats a
// management component by its delivery (pinned or fresh) only.
func modelComponent(c inputs.Component) inputs.Component {
	if c.IsFresh() {
		return CompPullSecret
	}
	return CompProxyDefaults
}

// settle is how long before now the model creates the pools, so that
// they run their current payload when the change comes.
func settleLead(pools []ForecastPool, boot time.Duration) time.Duration {
	lead := time.Hour
	for _, fp := range pools {
		if shape, ok := poolmath.ShapeOf(&fp.Pool.Spec, fp.Machines, fp.Machines); ok {
			lead = max(lead, time.Hour+shape.Soak+time.Duration(shape.Rounds)*(boot+2*time.Minute))
		}
	}
	return lead
}

// RunForecast runs the real engine (and fleet decision) over the pools in
// simulated time from now: each pool is created in the model with its
// spec, settled on its current payload, and at now the change is applied
// (each changed component carried by a model component of its delivery,
// with its drift's since), the pool's pause and maintenance settings
// restored, the forced rollouts asked of it carried on (requests), a
// halted pool held (HaltOf), its machines timed by its history's time per round
// (poolmath.Predict; the declared settings when it is too short), and the
// fleet rollout, if any, started. The world then runs to the horizon and
// each pool's rollout of the latest payload is read from its history.
//
// Pools do not meet in the model but through a fleet rollout (its waves,
// maxConcurrent, its held pools): the pools of the fleet rollout are one
// world, every other pool a world of its own, and the worlds run in
// parallel. A world of one pool steps only at that pool's events, so the
// forecast grows with the fleet, not with its square.
func RunForecast(in ForecastInput) Forecast {
	horizon := in.Horizon
	if horizon <= 0 {
		horizon = DefaultForecastHorizon
	}
	now := in.Now.UTC().Truncate(time.Second)
	out := Forecast{Now: now, Horizon: horizon, PoolsAt: map[int]*time.Time{}, NodesAt: map[int]*time.Time{}}
	groups := forecastGroups(in)
	peers := peerIndexOf(in.Pools)
	results := make([]forecastRun, len(groups))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range next {
				results[g] = runForecastWorld(in, now, horizon, groups[g], peers)
			}
		}()
	}
	for g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
	out.Pools = make([]PoolForecast, len(in.Pools))
	for g, r := range results {
		for k, i := range groups[g].pools {
			out.Pools[i] = r.pools[k]
		}
		out.Notes = append(out.Notes, r.notes...)
		if groups[g].fleet != nil {
			out.Waves, out.FleetEnd = r.waves, r.fleetEnd
		}
	}
	out.summarize()
	return out
}

// forecastGroup is the pools (indexes of ForecastInput.Pools) one world of
// a forecast models, with the fleet rollout that joins them (nil: one pool
// on its own).
type forecastGroup struct {
	pools []int
	fleet *ForecastFleet
}

// forecastGroups are the worlds of a forecast: the fleet rollout's pools
// together (first), every other pool alone.
func forecastGroups(in ForecastInput) []forecastGroup {
	var groups []forecastGroup
	inFleet := map[fleet.Ref]bool{}
	if in.Fleet != nil {
		for _, r := range in.Fleet.Pools {
			inFleet[r] = true
		}
		for r := range in.Fleet.Members {
			inFleet[r] = true
		}
		g := forecastGroup{fleet: in.Fleet}
		for i, fp := range in.Pools {
			if inFleet[fleet.Ref{Namespace: fp.Pool.Namespace, Name: fp.Pool.Name}] {
				g.pools = append(g.pools, i)
			}
		}
		groups = append(groups, g)
	}
	for i, fp := range in.Pools {
		if !inFleet[fleet.Ref{Namespace: fp.Pool.Namespace, Name: fp.Pool.Name}] {
			groups = append(groups, forecastGroup{pools: []int{i}})
		}
	}
	return groups
}

// forecastRun is what one world of a forecast says.
type forecastRun struct {
	pools    []PoolForecast
	notes    []string
	waves    []WaveForecast
	fleetEnd *time.Time
}

// runForecastWorld models one group's pools (RunForecast).
func runForecastWorld(in ForecastInput, now time.Time, horizon time.Duration, g forecastGroup, peers *peerIndex) forecastRun {
	var run forecastRun
	pools := make([]ForecastPool, 0, len(g.pools))
	for _, i := range g.pools {
		pools = append(pools, in.Pools[i])
	}
	const settleBoot = time.Minute
	w := New(now.Add(-settleLead(pools, settleBoot)))
	// The controller's settings, but never faster than the model's
	// defaults where they only set a cadence (cleanup), and without the
	// token rotation and the resync, which the model (it misses no
	// event: NoPolls) needs neither of: a development controller's 30s
	// resync over 60 days would be millions of steps, and none of them
	// decides when a pool rolls.
	if s := in.Settings; s.TokenTTL > 0 {
		s.CleanupGracePeriod = max(s.CleanupGracePeriod, w.Settings.CleanupGracePeriod)
		w.Settings = s
	}
	w.Settings.TokenTTL, w.Settings.ResyncPeriod = 4*horizon, 2*horizon
	w.BootDelay, w.AgentDelay, w.KeepGoing, w.Quiet, w.NoPolls = settleBoot, settleBoot, true, true, true
	w.FleetLookPerPool = forecastFleetLook
	var entries []*forecastEntry
	for _, fp := range pools {
		spec := fp.Pool.Spec.DeepCopy()
		replicas := fp.Machines
		spec.Replicas, spec.AutoScaling = &replicas, nil
		e := &forecastEntry{fp: fp, pause: spec.Management.PausedUntil, maint: spec.Management.Maintenance, halted: HaltOf(fp.Pool)}
		// Created and settled without its pause, windows and the forced
		// rollouts asked of it: they hold or start rollouts, not the
		// pool's first machines, and apply from now (requests).
		e.requests, e.rolloutAfter = requests(fp.Pool, now)
		spec.Management.PausedUntil, spec.Management.Maintenance, spec.Management.RolloutAfter = "", nil, nil
		labels := fp.Pool.Labels
		e.p = w.AddPool(PoolSpec{Name: fp.Pool.Name, Namespace: fp.Pool.Namespace, Replicas: replicas, Version: spec.Release.Version,
			Edit: func(np *nodepoolv1.NodePool) {
				np.Spec = *spec
				np.Labels = map[string]string{}
				for k, v := range labels {
					np.Labels[k] = v
				}
			}})
		e.p.Past = fp.Past
		if shape, ok := poolmath.ShapeOf(spec, replicas, replicas); ok {
			like := peers.like(fp)
			e.pred = poolmath.PredictFromPeers(shape, fp.Past, like)
			if e.pred.Peers > 0 {
				e.basis = peers.words(fp, like)
			}
		}
		entries = append(entries, e)
	}
	var fl *Fleet
	w.At(now, "the change is applied", func(w *World) {
		for _, e := range entries {
			p := e.p
			if got := len(p.Machines); got != int(e.fp.Machines) {
				run.notes = append(run.notes, fmt.Sprintf("%s/%s: the model settled %d of its %d machines before the change", p.Obj.Namespace, p.Name, got, e.fp.Machines))
			}
			p.Obj.Spec.Management.PausedUntil, p.Obj.Spec.Management.Maintenance = e.pause, e.maint
			p.Obj.Spec.Management.RolloutAfter = e.rolloutAfter
			for _, k := range sortedKeys(e.requests) {
				p.setAnnotation(k, e.requests[k])
				if k == nodepoolv1.AnnotationApplyPending {
					p.track.person, _ = time.Parse(time.RFC3339, e.requests[k])
				}
			}
			if e.halted != "" {
				// Halted: nothing of it rolls until a person acts; a fleet
				// rollout finds it held.
				p.Obj.Spec.Management.PausedUntil = "true"
			}
			if per := perRound(e.pred); per > 0 {
				p.BootDelay, p.AgentDelay = per, per
			}
			since := map[inputs.Component]time.Time{}
			for _, ch := range e.fp.Change {
				mc := modelComponent(ch.Component)
				at := ch.Since
				if at.IsZero() || at.After(now) {
					at = now
				}
				if old, ok := since[mc]; !ok || at.Before(old) {
					since[mc] = at
				}
			}
			running := p.runningPayload()
			for mc := range since {
				p.Inputs.Platform[mc] = p.Inputs.value(mc) + "-new"
			}
			if running == nil {
				continue
			}
			latest, _ := p.Latest()
			p.Obj.Status.PendingManagementChanges = nil
			for _, ch := range payload.Diff(running.Manifest, latest.Manifest) {
				at, ok := since[ch.Component]
				if !ok {
					continue
				}
				// The desired digest is new at now in the model, whose
				// machines are all older: a drift whose desired digest the
				// cluster saw days ago (desiredSince) is not taken as older
				// than every machine, which the Rollout policy would then
				// leave alone.
				seen := metav1.NewTime(now)
				p.Obj.Status.PendingManagementChanges = append(p.Obj.Status.PendingManagementChanges, nodepoolv1.PendingManagementChange{
					Component: ch.Component.Name(), Since: metav1.NewTime(at), DesiredSince: &seen, Current: ch.From, Desired: ch.To})
			}
		}
		if g.fleet != nil {
			fl = w.AddFleetRefs(g.fleet.Name, g.fleet.Spec, g.fleet.Pools)
			if st := g.fleet.Status; st != nil && st.StartedAt != nil {
				fl.resume(*st, g.fleet.Members)
			}
		}
	})
	w.At(now.Add(time.Second), "the forecast reads what holds each pool", func(w *World) {
		for _, e := range entries {
			e.first = e.p.LastPlan()
		}
	})
	restart := in.Fleet != nil && in.Fleet.Spec.Action == nodepoolv1.FleetActionRestart
	// The run ends once every pool's rollout is read (and the fleet
	// rollout is over): what follows changes nothing the forecast says.
	w.Done = func(w *World) bool {
		if w.Now.Before(now.Add(time.Second)) || fl != nil && !fl.terminal() {
			return false
		}
		for _, e := range entries {
			if !e.known(now, restart, fl != nil && e.p.Annotation(nodepoolv1.FleetRolloutPoolAnnotation(fl.Name)) != "") {
				return false
			}
		}
		return true
	}
	if err := w.Run(now.Add(horizon)); err != nil && len(w.Violations) == 0 {
		run.notes = append(run.notes, fmt.Sprintf("the model stopped at %s: %v", w.Now.UTC().Format(time.RFC3339), err))
	}
	if len(w.Violations) > 0 {
		run.notes = append(run.notes, fmt.Sprintf("the model found %d invariant violation(s), the first: %v", len(w.Violations), w.Violations[0]))
	}
	for _, e := range entries {
		run.pools = append(run.pools, e.read(now, restart, fl))
	}
	if fl != nil {
		for _, wv := range fl.Status.Waves {
			wf := WaveForecast{Wave: wv.Wave, Pools: wv.Pools}
			if wv.StartedAt != nil {
				wf.Start = timePtr(wv.StartedAt.Time)
			}
			if wv.CompletedAt != nil {
				wf.End = timePtr(wv.CompletedAt.Time)
			}
			run.waves = append(run.waves, wf)
		}
		if fl.Status.Phase == nodepoolv1.FleetPhaseComplete && fl.Status.CompletedAt != nil {
			run.fleetEnd = timePtr(fl.Status.CompletedAt.Time)
		}
	}
	return run
}

// forecastFleetLook is how long a forecast's fleet rollout of waves
// batches its pools' events, a pool (World.FleetLookPerPool): 100
// pools' ten seconds, 10,000 pools' 15 minutes. A wave's end is then
// forecast up to that late; the fleet rollout's cost in the model stays
// linear in its pools.
const forecastFleetLook = 100 * time.Millisecond

// perRound is the time per round a prediction assumes: what the model's
// machines take to boot (or update in place), to the model's clock tick
// (a second). It was once at least 30s, which made a 5-node pool that
// rolls in 6s take 2m30s in the model: an end outside its own spread.
func perRound(p poolmath.Prediction) time.Duration {
	if p.Shape.Rounds <= 0 {
		return 0
	}
	return max((p.Likely-p.Shape.Soak)/time.Duration(p.Shape.Rounds), time.Second)
}

// modelTicks is how far the model's run of a rollout that waits for
// nothing may be from its prediction: its clock ticks in seconds, and
// the engine looks again a second after a soak ends or a machine is due,
// a couple of times a round.
func modelTicks(s poolmath.Shape) time.Duration {
	return time.Duration(2*s.Rounds+4) * time.Second
}

func timePtr(t time.Time) *time.Time { t = t.UTC(); return &t }

// forecastEntry is one pool of a forecast's model.
type forecastEntry struct {
	fp    ForecastPool
	p     *Pool
	pause string
	maint *nodepoolv1.Maintenance
	// rolloutAfter and requests are the forced rollouts asked of it that
	// the model carries out from now (requests: the annotations).
	rolloutAfter *metav1.Time
	requests     map[string]string
	// halted is why it cannot roll without a person (HaltOf).
	halted string
	pred   poolmath.Prediction
	// basis says which pools like it the prediction is from ("" when
	// from its own history or the declared settings).
	basis string
	// first is the pool's plan at the change: what holds it then.
	first *rollout.Plan
}

// runningPayload is the payload the pool's machines run.
func (p *Pool) runningPayload() *payload.Payload {
	var ud string
	switch {
	case p.MD != nil:
		ud = p.MD.DataSecretName
	case p.MS != nil:
		ud = p.MS.DataSecretName
	}
	u, ok := p.UserData[ud]
	if !ok {
		return nil
	}
	return p.Payloads[u.PayloadHash]
}

// read is what the run says of one pool: the first rollout of the latest
// payload (for a restart, the first forced one) that started at or after
// now, when it started and completed, and what held the pool at now.
func (e *forecastEntry) read(now time.Time, restart bool, fl *Fleet) PoolForecast {
	p, obj := e.p, e.p.Obj
	f := PoolForecast{Namespace: obj.Namespace, Name: obj.Name, Machines: e.fp.Machines, Prediction: e.pred, Basis: e.basis}
	policy := obj.Spec.Management.ManagementUpdates
	if policy == "" {
		policy = nodepoolv1.ManagementUpdatesOnNextRollout
	}
	for _, ch := range e.fp.Change {
		c := ComponentForecast{Component: ch.Component.Name(), Delivery: string(ch.Component.Delivery()), Rolls: true}
		switch {
		case policy == nodepoolv1.ManagementUpdatesRollout:
			c.How = "rolls the nodes (managementUpdates: Rollout)"
		case policy == nodepoolv1.ManagementUpdatesNewNodes:
			c.Rolls, c.How = false, "new nodes boot it; running nodes at the next rollout (managementUpdates: NewNodes)"
		case ch.Component.IsFresh():
			c.Rolls, c.How = false, "new nodes boot it (fresh); running nodes at the next rollout (managementUpdates: OnNextRollout)"
		default:
			c.Rolls, c.How = false, "at the next rollout (managementUpdates: OnNextRollout)"
		}
		f.Components = append(f.Components, c)
	}
	if fl != nil {
		if m, ok, err := fleet.MemberOf(obj, fl.Name); ok && err == nil {
			f.Wave = m.Wave
		}
	}
	f.Holds = e.holds(now)
	if e.halted != "" {
		f.When, f.Reason = WhenNever, "halted: "+e.halted+" (kubectl nodepool rollout resume, or an owner change)"
		return f
	}
	if len(e.fp.Change) == 0 && !(restart && f.Wave > 0) {
		f.When = WhenNoChange
		f.Start, f.End = timePtr(now), timePtr(now)
		return f
	}
	rec := e.record(now, restart)
	if rec != nil {
		f.Rolls = true
		f.Start = timePtr(rec.Started)
		switch {
		case strings.HasPrefix(string(rec.Initiator), nodepoolv1.FleetRolloutInitiatorPrefix):
			f.When = WhenFleet
		case strings.Contains(strings.ToLower(rec.Reason), "deadline"):
			f.When = WhenDeadline
		case rec.Started.Sub(now) < 2*time.Minute:
			f.When = WhenNow
		case e.exclusionEndsAt(rec.Started):
			f.When = WhenExclusion
		case e.maint != nil && len(e.maint.Windows) > 0:
			f.When = WhenWindow
		default:
			f.When = WhenPause
		}
		if e.pred.Shape.Rounds > 0 {
			f.EndLow, f.EndHigh = timePtr(rec.Started.Add(e.pred.Low)), timePtr(rec.Started.Add(e.pred.High))
		}
		if rec.Outcome == OutcomeComplete && rec.Completed != nil {
			f.End = timePtr(*rec.Completed)
			if e.pred.Shape.Rounds > 0 {
				// The model's machines take the likely time per round, so
				// a rollout that waited for nothing takes the likely
				// duration but for the model's clock ticks: the forecast
				// says the duration it prints. One held longer keeps what
				// held it, and its spread moves with it.
				if held := rec.Completed.Sub(rec.Started) - e.pred.Likely; held > modelTicks(e.pred.Shape) {
					f.Held = held
				}
				f.End = timePtr(rec.Started.Add(e.pred.Likely + f.Held))
				f.EndLow, f.EndHigh = timePtr(rec.Started.Add(e.pred.Low+f.Held)), timePtr(rec.Started.Add(e.pred.High+f.Held))
			}
			for _, m := range p.Machines {
				at := m.NodeAt
				if p.InPlace() {
					at = m.UpdatedAt
				}
				if m.Payload == rec.PayloadHash && !at.Before(rec.Started) {
					if at.After(*f.End) {
						at = *f.End
					}
					f.NodeTimes = append(f.NodeTimes, at.UTC())
				}
			}
			sort.Slice(f.NodeTimes, func(i, j int) bool { return f.NodeTimes[i].Before(f.NodeTimes[j]) })
			for len(f.NodeTimes) < int(f.Machines) {
				f.NodeTimes = append(f.NodeTimes, *f.End)
			}
			return f
		}
	}
	f.When = WhenNever
	switch {
	case f.Wave > 0 && rec == nil && fl != nil && fl.Status.Phase != nodepoolv1.FleetPhaseComplete:
		f.Reason = fmt.Sprintf("its FleetRollout %s does not trigger it: %s", fl.Name, fl.Status.Message)
	case rec != nil:
		f.Reason = fmt.Sprintf("its rollout starts %s but does not complete within %s", rec.Started.UTC().Format(time.RFC3339), durationWords(e.horizon(now)))
	case policy != nodepoolv1.ManagementUpdatesRollout && !restart && (e.maint == nil || e.maint.DriftDeadline == nil) && f.Wave == 0:
		f.Reason = fmt.Sprintf("managementUpdates: %s: the running nodes keep what they run until an owner change or kubectl nodepool rollout apply-pending", policy)
	case e.first != nil && e.first.Decision.Pause.Paused && e.first.Decision.Pause.Until.IsZero():
		f.Reason = "paused until someone resumes it (spec.management.pausedUntil: " + e.pause + ")"
	default:
		f.Reason = "does not run it within " + durationWords(e.horizon(now))
	}
	return f
}

// record is the pool's rollout the forecast reads: the first complete
// rollout of the latest payload (for a restart, the first forced one)
// that started at or after now, or the first such rollout when none
// completed.
func (e *forecastEntry) record(now time.Time, restart bool) *Record {
	p := e.p
	latest, _ := p.Latest()
	var rec *Record
	for i := range p.History {
		r := &p.History[i]
		if r.Started.Before(now) {
			continue
		}
		if restart && (r.ForcedAt == nil || r.ForcedAt.Before(now)) {
			continue
		}
		if !restart && r.PayloadHash != latest.Hash {
			continue
		}
		if rec == nil {
			rec = r
		}
		if r.Outcome == OutcomeComplete {
			return r
		}
	}
	return rec
}

// known reports whether the run says all it will of the pool: it is
// halted, the change does not reach it, or the rollout read has
// completed (later steps change no earlier record).
func (e *forecastEntry) known(now time.Time, restart bool, wave bool) bool {
	if e.halted != "" || len(e.fp.Change) == 0 && !(restart && wave) {
		return true
	}
	r := e.record(now, restart)
	return r != nil && r.Outcome == OutcomeComplete
}

// exclusionEndsAt reports whether one of the pool's exclusions ends just
// before t (the rollout waited for it).
func (e *forecastEntry) exclusionEndsAt(t time.Time) bool {
	if e.maint == nil {
		return false
	}
	for _, x := range e.maint.Exclusions {
		if d := t.Sub(x.End.Time); d >= 0 && d < 2*time.Minute {
			return true
		}
	}
	return false
}

func (e *forecastEntry) horizon(now time.Time) time.Duration { return e.p.w.Now.Sub(now) }

// holds are what holds the pool at the change.
func (e *forecastEntry) holds(now time.Time) []string {
	var out []string
	if e.halted != "" {
		out = append(out, "halted")
	}
	if e.first == nil {
		return out
	}
	d := e.first.Decision
	if d.Pause.Paused && e.halted == "" {
		if d.Pause.Until.IsZero() {
			out = append(out, "paused")
		} else {
			out = append(out, "paused until "+d.Pause.Until.UTC().Format(time.RFC3339))
		}
	}
	if win := d.Window; win != nil {
		g := win.Platform
		switch {
		case g.Exclusion != "":
			out = append(out, fmt.Sprintf("exclusion %s until %s", g.Exclusion, g.Allowed.Start.UTC().Format(time.RFC3339)))
		case !g.Open && g.Found:
			out = append(out, "outside its windows until "+g.Allowed.Start.UTC().Format(time.RFC3339))
			// An exclusion that closes the windows before then.
			for _, x := range e.maint.Exclusions {
				if x.End.After(now) && x.Start.Time.Before(g.Allowed.Start) {
					out = append(out, fmt.Sprintf("exclusion %s until %s", x.Name, x.End.UTC().Format(time.RFC3339)))
				}
			}
		}
		if !win.DriftDeadline.IsZero() {
			out = append(out, "drift deadline "+win.DriftDeadline.UTC().Format(time.RFC3339))
		}
	}
	_ = now
	return out
}

// summarize fills the fleet summary: the time by which each percent of
// the pools and of their nodes run the new payload, and the pools that
// never will.
func (f *Forecast) summarize() {
	var ends, nodes []time.Time
	total := 0
	for _, p := range f.Pools {
		total += int(p.Machines)
		if p.End == nil {
			f.Never = append(f.Never, p.Namespace+"/"+p.Name)
			continue
		}
		ends = append(ends, *p.End)
		if p.When == WhenNoChange {
			for range p.Machines {
				nodes = append(nodes, *p.End)
			}
			continue
		}
		nodes = append(nodes, p.NodeTimes...)
	}
	at := func(ts []time.Time, n, pct int) *time.Time {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		k := int(math.Ceil(float64(n) * float64(pct) / 100))
		if k == 0 {
			return timePtr(f.Now)
		}
		if k > len(ts) {
			return nil
		}
		return timePtr(ts[k-1])
	}
	for _, pct := range Percents {
		f.PoolsAt[pct] = at(ends, len(f.Pools), pct)
		f.NodesAt[pct] = at(nodes, total, pct)
	}
}

// durationWords is a duration in days and hours.
func durationWords(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return d.Round(time.Minute).String()
}

// resume carries on a fleet rollout under way: its status, and each
// pool's state on the pool; a pool triggered whose part is not over is
// triggered again now.
func (f *Fleet) resume(st nodepoolv1.FleetRolloutStatus, members map[fleet.Ref]nodepoolv1.FleetRolloutPool) {
	w := f.w
	f.Status = *st.DeepCopy()
	key := nodepoolv1.FleetRolloutPoolAnnotation(f.Name)
	for ref, m := range members {
		p := w.PoolIn(ref.Namespace, ref.Name)
		if p == nil {
			continue
		}
		if m.TriggeredAt != nil && (m.State == nodepoolv1.FleetPoolRolling || m.State == nodepoolv1.FleetPoolTakenOver) {
			at := metav1.NewTime(w.Now)
			m.TriggeredAt, m.State, m.Revision = &at, nodepoolv1.FleetPoolRolling, 0
			p.setAnnotation(nodepoolv1.AnnotationApplyPending, w.Now.UTC().Format(time.RFC3339))
			p.setAnnotation(nodepoolv1.AnnotationFleetRollout, f.Name)
		}
		p.setAnnotation(key, fleet.Encode(m))
	}
	f.due = w.Now
}

// peerKey is what makes pools alike for a prediction: the same
// infrastructure template kind of the same provider (its API group), the
// same upgrade type (booting a machine and updating one in place take
// different times).
type peerKey struct{ kind, provider, upgrade string }

func peerKeyOf(p *nodepoolv1.NodePool) peerKey {
	ref := p.Spec.InfrastructureTemplateRef
	upgrade := string(p.Spec.Management.UpgradeType)
	if upgrade == "" {
		upgrade = string(nodepoolv1.UpgradeTypeReplace)
	}
	return peerKey{kind: ref.Kind, provider: ref.APIGroup, upgrade: upgrade}
}

// peerIndex is, for each peerKey, the time per round of the pools of the
// forecast whose own history is long enough (poolmath.PeerTimeOf), by
// machine count.
type peerIndex struct {
	by map[peerKey][]poolmath.PeerTime
}

func peerIndexOf(pools []ForecastPool) *peerIndex {
	x := &peerIndex{by: map[peerKey][]poolmath.PeerTime{}}
	for _, fp := range pools {
		if pt, ok := poolmath.PeerTimeOf(fp.Machines, fp.Past); ok {
			k := peerKeyOf(fp.Pool)
			x.by[k] = append(x.by[k], pt)
		}
	}
	for k, pts := range x.by {
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].Machines < pts[j].Machines })
		x.by[k] = pts
	}
	return x
}

// like are the pools like fp (its key, a machine count within a factor
// of two), at most poolmath.MaxPeers of them, the nearest in machine
// count; none when fp's own history is long enough.
func (x *peerIndex) like(fp ForecastPool) []poolmath.PeerTime {
	if _, ok := poolmath.PeerTimeOf(fp.Machines, fp.Past); ok || fp.Machines <= 0 {
		return nil
	}
	pts := x.by[peerKeyOf(fp.Pool)]
	m := fp.Machines
	lo := sort.Search(len(pts), func(i int) bool { return 2*pts[i].Machines >= m })
	hi := sort.Search(len(pts), func(i int) bool { return pts[i].Machines > 2*m })
	if hi-lo <= poolmath.MaxPeers {
		return pts[lo:hi]
	}
	// The nearest in machine count: out from where m would be, the
	// nearer side first (the smaller on a tie).
	l := sort.Search(hi-lo, func(i int) bool { return pts[lo+i].Machines >= m }) + lo - 1
	r := l + 1
	for r-l-1 < poolmath.MaxPeers {
		if r >= hi || l >= lo && m-pts[l].Machines <= pts[r].Machines-m {
			l--
		} else {
			r++
		}
	}
	return pts[l+1 : r]
}

// words name the pools like fp a prediction is from.
func (x *peerIndex) words(fp ForecastPool, like []poolmath.PeerTime) string {
	k := peerKeyOf(fp.Pool)
	lo, hi := like[0].Machines, like[0].Machines
	for _, pt := range like {
		lo, hi = min(lo, pt.Machines), max(hi, pt.Machines)
	}
	machines := fmt.Sprintf("%d machines", lo)
	if hi != lo {
		machines = fmt.Sprintf("%d–%d machines", lo, hi)
	}
	return fmt.Sprintf("%d pools like it (%s of %s, %s, %s)", len(like), k.kind, k.provider, k.upgrade, machines)
}
