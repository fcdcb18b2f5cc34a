package gates

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// A fleet rollout over a pool outside its maintenance window waits for the
// window (heldPools: Wait) and rolls it once the window opens; one over a
// paused pool skips it (heldPools: Skip). Real time: Cluster API compares
// the forced rollout's time with real creation times, so the window opens
// a minute or two from now rather than on a shifted clock.
func TestAFleetRolloutWaitsForAPoolsWindowAndSkipsAPausedPoolWhenAskedTo(t *testing.T) {
	const label = "window"
	pools := newFleetPools(t, label, 3, 3)
	opens := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Minute)
	windowed, paused := pools[1], pools[2]
	stack.Update(t, env.Client, windowed, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
			Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}}
	})
	st.WaitForPool(t, windowed, time.Minute, "outside its window", reasonOf(nodepoolv1.ConditionMaintenanceWindow, nodepoolv1.ReasonOutsideMaintenanceWindow))
	stack.Update(t, env.Client, paused, func(p *nodepoolv1.NodePool) { p.Labels["fleet-paused"] = "yes"; p.Spec.Management.PausedUntil = "true" })

	// Wait: the pools of the rollout but the paused one.
	waiting := newFleetRollout(t, label, func(fr *nodepoolv1.FleetRollout) {
		fr.Spec.Action = nodepoolv1.FleetActionRestart
		fr.Spec.PoolSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "fleet-paused", Operator: metav1.LabelSelectorOpDoesNotExist}}
		fr.Spec.Waves = []intstr.IntOrString{intstr.FromString("100%")}
	})
	held := waitForFleet(t, waiting, 3*time.Minute, "the pool in its window done, the other waiting for its window", func(fr *nodepoolv1.FleetRollout) bool {
		return len(fr.Status.Waves) == 1 && fr.Status.Waves[0].Done == 1 && fr.Status.Waves[0].Waiting == 1
	})
	if time.Now().Before(opens) {
		for _, sp := range stack.FleetPools(t, env.Client, held) {
			if sp.Name == windowed.Name && (sp.State != nodepoolv1.FleetPoolWaiting || !strings.Contains(sp.Message, nodepoolv1.ReasonOutsideMaintenanceWindow)) {
				t.Fatalf("the windowed pool: %+v", sp)
			}
		}
		if held.Status.Phase != nodepoolv1.FleetPhaseProgressing {
			t.Fatalf("the rollout waits for the pool: %s", describeFleet(held))
		}
	}
	done := waitForFleet(t, waiting, fleetTimeout, "complete once the window opened", phaseIs(nodepoolv1.FleetPhaseComplete))
	recs := fleetRecords(t, windowed, waiting)
	if len(recs) != 1 || recs[0].Outcome != history.OutcomeComplete {
		t.Fatalf("the windowed pool's fleet records %+v; %s", recs, describeFleet(done))
	}
	if recs[0].Started.Before(opens) {
		t.Fatalf("the windowed pool rolled at %s, before its window opened at %s", recs[0].Started, opens)
	}

	// Skip: the paused pool is skipped, not rolled.
	skipping := newFleetRollout(t, "window-paused", func(fr *nodepoolv1.FleetRollout) {
		fr.Spec.Action = nodepoolv1.FleetActionRestart
		fr.Spec.PoolSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-paused": "yes", "fleet": label}}
		fr.Spec.NamespaceSelector = nil
		fr.Spec.HeldPools = nodepoolv1.HeldPoolSkip
	})
	skipped := waitForFleet(t, skipping, 2*time.Minute, "complete, the paused pool skipped", phaseIs(nodepoolv1.FleetPhaseComplete))
	if sp := stack.FleetPoolsAgreeing(t, env.Client, skipped); len(sp) != 1 || sp[0].State != nodepoolv1.FleetPoolSkipped || !strings.Contains(sp[0].Message, "paused") {
		t.Fatalf("%+v", sp)
	}
	if recs := fleetRecords(t, paused, skipping); len(recs) != 0 {
		t.Fatalf("the paused pool rolled: %+v", recs)
	}
}
