package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestFleetMetricsCountDriftPerComponentPoolsPerWaveStateAndTheRolloutsAge(t *testing.T) {
	s := runtime.NewScheme()
	if err := nodepoolv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	drift := func(ns string, comps ...string) *nodepoolv1.NodePool {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"}}
		for _, c := range comps {
			p.Status.PendingManagementChanges = append(p.Status.PendingManagementChanges, nodepoolv1.PendingManagementChange{Component: c})
		}
		return p
	}
	started := metav1.NewTime(t0.Add(-90 * time.Second))
	predicted := metav1.NewTime(t0.Add(3 * time.Hour))
	fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: "proxy-fix"}, Status: nodepoolv1.FleetRolloutStatus{
		Phase: nodepoolv1.FleetPhaseProgressing, StartedAt: &started, PredictedCompletion: &predicted,
		Waves: []nodepoolv1.FleetRolloutWave{{Wave: 1, Pools: 1, Done: 1}, {Wave: 2, Pools: 3, Rolling: 2, Waiting: 1}},
	}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		drift("a", "apiserver-proxy", "pull-secret"), drift("b", "apiserver-proxy"), drift("c"), fr,
	).Build()
	col := &fleetCollector{}
	var rd client.Reader = c
	clock := func() time.Time { return t0 }
	col.reader.Store(&rd)
	col.clock.Store(&clock)
	want := `
# HELP nodepool_fleet_pools_pending_drift Pools whose running nodes differ from the latest platform payload in a component, by component, across the fleet.
# TYPE nodepool_fleet_pools_pending_drift gauge
nodepool_fleet_pools_pending_drift{component="apiserver-proxy"} 2
nodepool_fleet_pools_pending_drift{component="pull-secret"} 1
# HELP nodepool_fleetrollout_started_seconds Seconds since a fleet rollout started (until it completed or was cancelled, for one that ended).
# TYPE nodepool_fleetrollout_started_seconds gauge
nodepool_fleetrollout_started_seconds{fleetrollout="proxy-fix",phase="Progressing"} 90
# HELP nodepool_fleetrollout_predicted_completion_timestamp_seconds When a fleet rollout in progress is forecast to complete (status.predictedCompletion), as a Unix time; absent while it is not forecast to complete without action.
# TYPE nodepool_fleetrollout_predicted_completion_timestamp_seconds gauge
nodepool_fleetrollout_predicted_completion_timestamp_seconds{fleetrollout="proxy-fix"} 1.79613e+09
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "nodepool_fleet_pools_pending_drift", "nodepool_fleetrollout_started_seconds",
		"nodepool_fleetrollout_predicted_completion_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	wantWaves := `
# HELP nodepool_fleetrollout_pools Pools of a fleet rollout by wave and state (Pending, Waiting, Rolling, Done, Skipped, Failed, TakenOver).
# TYPE nodepool_fleetrollout_pools gauge
`
	for _, l := range []string{
		`{fleetrollout="proxy-fix",state="Done",wave="1"} 1`, `{fleetrollout="proxy-fix",state="Failed",wave="1"} 0`,
		`{fleetrollout="proxy-fix",state="Pending",wave="1"} 0`, `{fleetrollout="proxy-fix",state="Rolling",wave="1"} 0`,
		`{fleetrollout="proxy-fix",state="Skipped",wave="1"} 0`, `{fleetrollout="proxy-fix",state="Waiting",wave="1"} 0`,
		`{fleetrollout="proxy-fix",state="Done",wave="2"} 0`, `{fleetrollout="proxy-fix",state="Failed",wave="2"} 0`,
		`{fleetrollout="proxy-fix",state="Pending",wave="2"} 0`, `{fleetrollout="proxy-fix",state="Rolling",wave="2"} 2`,
		`{fleetrollout="proxy-fix",state="Skipped",wave="2"} 0`, `{fleetrollout="proxy-fix",state="Waiting",wave="2"} 1`,
		`{fleetrollout="proxy-fix",state="TakenOver",wave="1"} 0`, `{fleetrollout="proxy-fix",state="TakenOver",wave="2"} 0`,
	} {
		wantWaves += "nodepool_fleetrollout_pools" + l + "\n"
	}
	if err := testutil.CollectAndCompare(col, strings.NewReader(wantWaves), "nodepool_fleetrollout_pools"); err != nil {
		t.Error(err)
	}
}
