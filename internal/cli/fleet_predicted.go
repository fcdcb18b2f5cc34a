package cli

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/history/listing"
	"nodepool.dev/nodepool/internal/scenario"
)

// runsLatest fills, for each row with pending drift, when the pool is
// forecast to run the latest platform payload: a pool that a fleet
// rollout in progress has yet to roll, by its wave's predicted end (the
// FleetRollout's status); any other, by the scenario engine over the
// pools with their pending drift, windows, deadlines, pauses and history
// (as kubectl nodepool fleet forecast does without a change).
func (o *Options) runsLatest(ctx context.Context, c client.Client, now time.Time, rows []FleetRow, pools []nodepoolv1.NodePool) error {
	byKey := map[string]*nodepoolv1.NodePool{}
	for i := range pools {
		byKey[pools[i].Namespace+"/"+pools[i].Name] = &pools[i]
	}
	rollouts := map[string]nodepoolv1.FleetRollout{}
	list := &nodepoolv1.FleetRolloutList{}
	if err := c.List(ctx, list); err == nil {
		for _, fr := range list.Items {
			rollouts[fr.Name] = fr
		}
	}
	var in scenario.ForecastInput
	in.Now = now
	// The controller's engine settings, if the user may read them (a
	// user with nodepool-view in the namespace may not: the forecast then
	// takes the engine's defaults).
	if o.maySettings(ctx) {
		if ctl, err := o.controllerSettings(ctx, c); err == nil {
			in.Settings = ctl.engine
		}
	}
	at := map[string]int{}
	for i := range rows {
		r := &rows[i]
		if len(r.Drift) == 0 {
			continue
		}
		p := byKey[r.Namespace+"/"+r.Pool]
		if p == nil {
			continue
		}
		if t, desc, ok := byFleet(p, rollouts); ok {
			r.RunsLatestAt, r.RunsLatest = t, desc
			continue
		}
		past, err := listing.RecentRollouts(ctx, c, p)
		if err != nil {
			r.RunsLatest = "unknown: its history cannot be read: " + err.Error()
			continue
		}
		// The forecast reads the pool's halt and requests from the pool
		// (scenario.HaltOf, its annotations).
		fp := scenario.ForecastPool{Pool: p, Machines: r.Desired, Past: past, Change: scenario.ChangesOf(p.Status.PendingManagementChanges)}
		at[r.Namespace+"/"+r.Pool] = i
		in.Pools = append(in.Pools, fp)
	}
	if len(in.Pools) == 0 {
		return nil
	}
	for _, f := range scenario.RunForecast(in).Pools {
		r := &rows[at[f.Namespace+"/"+f.Name]]
		r.RunsLatestAt, r.RunsLatest = f.End, f.When
		if f.End == nil {
			r.RunsLatest = "never: " + f.Reason
		}
	}
	return nil
}

// byFleet is, for a pool a fleet rollout in progress has yet to roll, its
// wave's predicted end.
func byFleet(p *nodepoolv1.NodePool, rollouts map[string]nodepoolv1.FleetRollout) (*time.Time, string, bool) {
	for _, name := range fleet.RolloutsOf(p) {
		m, ok, _ := fleet.MemberOf(p, name)
		fr, known := rollouts[name]
		if !ok || !known || fr.Status.Phase == nodepoolv1.FleetPhaseComplete || fr.Status.Phase == nodepoolv1.FleetPhaseCancelled {
			continue
		}
		if m.State == nodepoolv1.FleetPoolDone || m.State == nodepoolv1.FleetPoolSkipped {
			continue
		}
		for _, w := range fr.Status.Waves {
			if w.Wave == m.Wave && w.PredictedEnd != nil {
				t := w.PredictedEnd.UTC()
				return &t, fmt.Sprintf("fleet %s wave %d", name, m.Wave), true
			}
		}
		return nil, fmt.Sprintf("fleet %s wave %d: not forecast to complete", name, m.Wave), true
	}
	return nil, "", false
}
