package cli

import (
	"strings"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// plan words the engine's drain forecast: each pod that blocks or slows a
// drain, whether one blocks (the exit status), and, without a maintenance
// window to fit, what the block does to the rollout in its message.
func TestPlanWordsTheEnginesDrainForecast(t *testing.T) {
	f := &rollout.DrainForecast{Policy: poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainHalt, Timeout: time.Hour}, AtOnce: 1, Ignored: 1,
		Risks: []rollout.DrainRisk{
			{Pod: "apps/guarded", Node: "n1", Budget: "guarded", Blocks: true, Why: "PodDisruptionBudget guarded allows no disruption now"},
			{Pod: "apps/bare", Node: "n1", Why: "no controller owns it"},
		}}
	pool := &nodepoolv1.NodePool{}
	r := PlanResult{Rollout: PlanNow, Rolls: true, Initiator: "spec", Strategy: "RollingUpdate", Machines: 1, Steps: 1, MaxSurge: 1}
	planDrains(&r, rollout.Decision{DrainForecast: f})
	if len(r.Drains) != 2 || !r.DrainBlocks || r.DrainIgnored != 1 || r.Drains[0].Budget != "guarded" || !r.Drains[0].Blocks || r.Drains[1].Blocks {
		t.Fatalf("plan drains %+v (blocks %v, ignored %d), want the guarded pod blocking, the bare one slowing, 1 ignored", r.Drains, r.DrainBlocks, r.DrainIgnored)
	}
	if msg := planMessage(&r, "", pool); !strings.Contains(msg, f.Stall()) || !strings.Contains(msg, "the rollout is predicted to halt") {
		t.Errorf("message %q does not say what the block does to the rollout (%q)", msg, f.Stall())
	}
	var out strings.Builder
	printDrains(&out, r)
	for _, want := range []string{
		"drain BLOCKS: pod apps/guarded on node n1: PodDisruptionBudget guarded allows no disruption now",
		"drain slows: pod apps/bare on node n1: no controller owns it",
		"drain ignores 1 DaemonSet or static pods",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan prints\n%s\nwithout %q", out.String(), want)
		}
	}

	// With a window, the fit the engine predicts says it: not twice.
	r.Window = "it fits the 1h0m0s of the window; but " + f.Stall()
	if msg := planMessage(&r, "", pool); strings.Count(msg, f.Stall()) != 1 {
		t.Errorf("message %q says the stall %d times, want once", msg, strings.Count(msg, f.Stall()))
	}

	// Nothing rolls: nothing is said of drains.
	quiet := PlanResult{Rollout: PlanNone}
	planDrains(&quiet, rollout.Decision{DrainForecast: f})
	if len(quiet.Drains) != 0 || quiet.DrainBlocks || strings.Contains(planMessage(&quiet, "", pool), "drain") {
		t.Errorf("a plan that rolls nothing says of drains: %+v", quiet)
	}
}
