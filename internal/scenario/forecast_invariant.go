package scenario

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"nodepool.dev/nodepool/internal/rollout"
)

// The forecast runs worlds whose steps check the invariants (they are
// Quiet: none is), so it joins the list at init.
func init() {
	Invariants = append(Invariants, Check{"TheForecastSaysWhenTheDriftIsApplied", TheForecastSaysWhenTheDriftIsApplied})
}

// forecastCheck is a forecast of when a waiting pool applies its pending
// platform drift, made from the pool as `fleet forecast` reads it, and
// what it was made from.
type forecastCheck struct {
	at      time.Time
	start   *time.Time // nil: not within the horizon
	when    string
	actions int    // Pool.actions then
	key     string // the pool as the forecast read it (forecastKey)
}

// ForecastsMade and ForecastsConfirmed count, over a process's random
// seeds, the forecasts this invariant made and those the engine then
// bore out (a start at the forecast's time, or none within the horizon
// while nothing happened): how much it checked.
var ForecastsMade, ForecastsConfirmed atomic.Int64

// forecastsByAction and forecastsByChange count the forecasts an action
// or a change of the pool overtook.
var forecastsByAction, forecastsByChange atomic.Int64

// ForecastCounts says how much the invariant checked.
func ForecastCounts() string {
	return fmt.Sprintf("%d made, %d borne out, %d overtaken by an action, %d by a change of the pool", ForecastsMade.Load(), ForecastsConfirmed.Load(), forecastsByAction.Load(), forecastsByChange.Load())
}

// debugKeys, when set, prints what changed a forecast's key.
var debugKeys = os.Getenv("NODEPOOL_SIM_DEBUG_FORECAST") != ""

// countAction counts an action for the pools its description names, or
// for every pool when it names none. The platform's changes and a
// controller restart are not counted: a forecast's start must hold across
// a new desired digest of a component already pending (a new component
// changes forecastKey) and across a restart.
func (w *World) countAction(what string) {
	if strings.HasPrefix(what, "platform ") || what == "controller restarts" {
		return
	}
	words := strings.FieldsFunc(what, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' })
	named := false
	for _, p := range w.pools {
		for _, word := range words {
			if word == p.Name {
				p.actions++
				named = true
				break
			}
		}
	}
	if !named {
		for _, p := range w.pools {
			p.actions++
		}
	}
}

// forecastTolerance is how far the engine's start may be from the
// forecast's: the model's reconciles and requeues are not the forecast
// world's to the second.
const forecastTolerance = 2 * time.Minute

// forecastHorizon is how far the checked forecasts look.
const forecastHorizon = 3 * 24 * time.Hour

// forecastKey is what of the pool a forecast reads that a reconcile may
// change: its spec, its annotations (requests), its pending drift that
// was pending at asOf (a component that joins later changes neither the
// drift deadline, which counts from the oldest, nor the window) and its
// Cluster's pause. A forecast made on another key is not checked.
func forecastKey(p *Pool, asOf time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "g%d paused=%v;", p.Obj.Generation, p.ClusterPaused)
	keys := make([]string, 0, len(p.Obj.Annotations))
	for k := range p.Obj.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s;", k, p.Obj.Annotations[k])
	}
	for _, r := range p.Obj.Status.PendingManagementChanges {
		if r.Since.After(asOf) {
			continue
		}
		fmt.Fprintf(&b, "%s:%s@%s;", r.Component, r.Current, r.Since.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// TheForecastSaysWhenTheDriftIsApplied: the forecast of a pool whose
// pending platform drift waits (`fleet forecast`, RunForecast, made from
// the pool's objects alone) says when the engine starts the rollout that
// applies it, or that it does not within its horizon, as long as nothing
// else happens: no scripted action (an owner's, a person's, the
// platform's, a fault) and no change of what the forecast read. Pools of
// a world with fleet rollouts are left out (their waves are the fleet
// forecast's, checked in named scenarios). Only worlds that ask for it
// (World.CheckForecasts) are checked: a forecast runs a world of its own
// for up to three days, and the random interleavings' actions, hours
// apart, overtake nearly every one (TestTheForecastSaysWhenRandomPools
// leaves them undisturbed).
func TheForecastSaysWhenTheDriftIsApplied(c *Context) error {
	p, w := c.P, c.W
	t := &p.track
	if !w.CheckForecasts || len(w.fleets) > 0 {
		return nil
	}
	if f := t.forecast; f != nil {
		if p.actions != f.actions {
			t.forecast = nil
			forecastsByAction.Add(1)
			if debugKeys {
				st := "never"
				if f.start != nil {
					st = f.start.Sub(f.at).String()
				}
				fmt.Fprintf(os.Stderr, "forecast of %s made %s (%s, start +%s) overtaken by an action after %s\n", p.Name, f.at.UTC().Format(time.RFC3339), f.when, st, w.Now.Sub(f.at))
			}
		} else if k := forecastKey(p, f.at); k != f.key && !startedDrift(c) {
			t.forecast = nil
			forecastsByChange.Add(1)
			if debugKeys {
				fmt.Fprintf(os.Stderr, "forecast key of %s changed at %s:\n  %s\n  %s\n", p.Name, w.Now.UTC().Format(time.RFC3339), f.key, k)
			}
		} else if startedDrift(c) {
			t.forecast = nil
			switch {
			case f.start == nil && w.Now.Sub(f.at) > forecastHorizon:
				// Beyond the horizon, as it said.
			case f.start == nil:
				return fmt.Errorf("the forecast made at %s said the drift is not applied within %s (%s); its rollout started now", f.at.UTC().Format(time.RFC3339), forecastHorizon, f.when)
			case absDuration(w.Now.Sub(*f.start)) > forecastTolerance:
				return fmt.Errorf("the forecast made at %s said the drift's rollout starts at %s (%s); it started now", f.at.UTC().Format(time.RFC3339), f.start.UTC().Format(time.RFC3339), f.when)
			}
			ForecastsConfirmed.Add(1)
			return nil
		} else if f.start == nil && w.Now.Sub(f.at) > forecastHorizon {
			t.forecast = nil
			ForecastsConfirmed.Add(1)
			return nil
		} else if f.start != nil && w.Now.Sub(*f.start) > forecastTolerance {
			t.forecast = nil
			return fmt.Errorf("the forecast made at %s said the drift's rollout starts at %s (%s); nothing started", f.at.UTC().Format(time.RFC3339), f.start.UTC().Format(time.RFC3339), f.when)
		} else {
			return nil
		}
	}
	if !forecastable(c) {
		return nil
	}
	fp := ForecastPool{Pool: p.Obj.DeepCopy(), Machines: int32(len(p.Machines)), Past: p.recentRollouts(),
		Change: ChangesOf(p.Obj.Status.PendingManagementChanges)}
	fc := RunForecast(ForecastInput{Now: w.Now, Horizon: forecastHorizon, Settings: w.Settings, Pools: []ForecastPool{fp}})
	if len(fc.Pools) != 1 {
		return nil
	}
	pf := fc.Pools[0]
	ForecastsMade.Add(1)
	t.forecast = &forecastCheck{at: w.Now, start: pf.Start, when: pf.When, actions: p.actions, key: forecastKey(p, w.Now)}
	return nil
}

// forecastable reports whether the pool is one a forecast speaks of
// plainly: platform drift pending, nothing rolling or halted, the inputs
// rendered, its Cluster not paused.
func forecastable(c *Context) bool {
	p := c.P
	if len(p.Obj.Status.PendingManagementChanges) == 0 || p.ClusterPaused || c.In.RenderErr != nil {
		return false
	}
	s := c.Plan.Decision.Standing
	if s.Phase != rollout.PhaseSettled && s.Phase != rollout.PhaseHeld {
		return false
	}
	for _, r := range p.History {
		if r.Outcome == OutcomeInProgress {
			return false
		}
	}
	return c.Plan.Decision.Action == rollout.ActionNone
}

// startedDrift reports whether a rollout that applies the platform's
// drift started in this reconcile (a forced rollout of the platform, the
// Rollout policy or the drift deadline).
func startedDrift(c *Context) bool {
	for _, r := range c.Started {
		switch r.Initiator {
		case rollout.InitiatorPlatform, rollout.InitiatorPolicy, rollout.InitiatorDeadline:
			return true
		}
	}
	return false
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
