package controller

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Fleet metrics, computed from the manager's cache at each scrape (so no
// series outlives the pool or fleet rollout it describes).
var (
	fleetPendingDriftDesc = prometheus.NewDesc("nodepool_fleet_pools_pending_drift",
		"Pools whose running nodes differ from the latest platform payload in a component, by component, across the fleet.",
		[]string{"component"}, nil)
	fleetRolloutPoolsDesc = prometheus.NewDesc("nodepool_fleetrollout_pools",
		"Pools of a fleet rollout by wave and state (Pending, Waiting, Rolling, Done, Skipped, Failed, TakenOver).",
		[]string{"fleetrollout", "wave", "state"}, nil)
	fleetRolloutAgeDesc = prometheus.NewDesc("nodepool_fleetrollout_started_seconds",
		"Seconds since a fleet rollout started (until it completed or was cancelled, for one that ended).",
		[]string{"fleetrollout", "phase"}, nil)

	fleetRolloutPredictedDesc = prometheus.NewDesc("nodepool_fleetrollout_predicted_completion_timestamp_seconds",
		"When a fleet rollout in progress is forecast to complete (status.predictedCompletion), as a Unix time; absent while it is not forecast to complete without action.",
		[]string{"fleetrollout"}, nil)

	fleetMetrics     = &fleetCollector{}
	fleetMetricsOnce sync.Once
)

// fleetCollector reads the cache of the running manager (a restarted
// controller swaps in its own).
type fleetCollector struct {
	reader atomic.Pointer[client.Reader]
	clock  atomic.Pointer[func() time.Time]
}

func registerFleetMetrics(r client.Reader, clock func() time.Time) {
	fleetMetrics.reader.Store(&r)
	if clock == nil {
		clock = time.Now
	}
	fleetMetrics.clock.Store(&clock)
	fleetMetricsOnce.Do(func() { metrics.Registry.MustRegister(fleetMetrics) })
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- fleetPendingDriftDesc
	ch <- fleetRolloutPoolsDesc
	ch <- fleetRolloutAgeDesc
	ch <- fleetRolloutPredictedDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	rp := c.reader.Load()
	if rp == nil {
		return
	}
	r, now := *rp, (*c.clock.Load())()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pools := &nodepoolv1.NodePoolList{}
	if err := r.List(ctx, pools, client.UnsafeDisableDeepCopy); err == nil {
		for comp, n := range pendingDriftByComponent(pools.Items) {
			ch <- prometheus.MustNewConstMetric(fleetPendingDriftDesc, prometheus.GaugeValue, float64(n), comp)
		}
	}
	frs := &nodepoolv1.FleetRolloutList{}
	if err := r.List(ctx, frs, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for _, fr := range frs.Items {
		for _, w := range fr.Status.Waves {
			wave := strconv.Itoa(int(w.Wave))
			for state, n := range map[nodepoolv1.FleetPoolState]int32{
				nodepoolv1.FleetPoolPending: w.Pending, nodepoolv1.FleetPoolWaiting: w.Waiting, nodepoolv1.FleetPoolRolling: w.Rolling,
				nodepoolv1.FleetPoolDone: w.Done, nodepoolv1.FleetPoolSkipped: w.Skipped, nodepoolv1.FleetPoolFailed: w.Failed,
				nodepoolv1.FleetPoolTakenOver: w.TakenOver,
			} {
				ch <- prometheus.MustNewConstMetric(fleetRolloutPoolsDesc, prometheus.GaugeValue, float64(n), fr.Name, wave, string(state))
			}
		}
		if fr.Status.StartedAt != nil {
			end := now
			if fr.Status.CompletedAt != nil {
				end = fr.Status.CompletedAt.Time
			}
			ch <- prometheus.MustNewConstMetric(fleetRolloutAgeDesc, prometheus.GaugeValue, end.Sub(fr.Status.StartedAt.Time).Seconds(), fr.Name, string(fr.Status.Phase))
		}
		if pc := fr.Status.PredictedCompletion; pc != nil && !terminal(&fr) {
			ch <- prometheus.MustNewConstMetric(fleetRolloutPredictedDesc, prometheus.GaugeValue, float64(pc.Unix()), fr.Name)
		}
	}
}

// pendingDriftByComponent counts the pools with each pending component.
func pendingDriftByComponent(pools []nodepoolv1.NodePool) map[string]int {
	out := map[string]int{}
	for _, p := range pools {
		for _, d := range p.Status.PendingManagementChanges {
			out[d.Component]++
		}
	}
	return out
}
