package scenario

import (
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Defect 9: a rollout's own events, once each. Every completed rollout
// says RolloutComplete, a forced one too, and none says Corrected (the
// annotations advance with the rollout); a held rollout says
// RolloutDeferred once, not at every look.
func TestScenarioEveryRolloutSaysItsEventsOnce(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(time.Hour, "platform bumps the renderer to r2 (the Rollout policy forces it)", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Hour, "person runs apply-pending after a proxy bump", func(*World) {
		p.Inputs.Platform[CompProxyDefaults] = "p2"
		ApplyPending(p, "")
	})
	run(t, w, 4*time.Hour)
	complete := 0
	for _, r := range p.History[1:] { // a new pool's first machines say nothing
		if r.Outcome == OutcomeComplete {
			complete++
		}
	}
	if n := len(eventsOf(p, nodepoolv1.EventRolloutComplete)); n != complete || complete < 3 {
		t.Errorf("%d RolloutComplete events for %d rollouts completed after the first (want 3 or more)\n%s", n, complete, w.Trace())
	}
	if e := eventsOf(p, nodepoolv1.EventCorrected); len(e) > 0 {
		t.Errorf("Corrected events during rollouts: %+v\n%s", e, w.Trace())
	}
}

func TestScenarioAHeldRolloutSaysRolloutDeferredOnce(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: gatedNightly})
	w.After(time.Minute, "owner edits the config to c2 (held until the window)", func(*World) { p.Inputs.Config = "c2" })
	w.After(2*time.Minute, "controller restarts", func(w *World) { w.Restart() })
	w.After(3*time.Minute, "owner scales to 3", func(*World) { p.Obj.Spec.Replicas = ptrInt(3) })
	run(t, w, 6*time.Hour)
	if n := len(eventsOf(p, nodepoolv1.EventRolloutDeferred)); n != 1 {
		t.Errorf("%d RolloutDeferred events for one held change, want 1: %+v\n%s", n, eventsOf(p, nodepoolv1.EventRolloutDeferred), w.Trace())
	}
}

func TestScenarioAPausedPoolSaysRolloutDeferredOnce(t *testing.T) {
	for _, what := range []string{"owner change", "apply-pending"} {
		t.Run(what, func(t *testing.T) {
			w := New(t0)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2})
			w.After(time.Minute, "owner pauses the pool for 3h", func(w *World) {
				p.Obj.Spec.Management.PausedUntil = w.Now.Add(3 * time.Hour).UTC().Format(time.RFC3339)
			})
			w.After(2*time.Minute, what, func(*World) {
				if what == "owner change" {
					p.Inputs.Config = "c2"
				} else {
					p.Inputs.Platform[CompRenderer] = "r2"
					ApplyPending(p, "")
				}
			})
			w.After(30*time.Minute, "owner scales to 3", func(*World) { p.Obj.Spec.Replicas = ptrInt(3) })
			run(t, w, 2*time.Hour)
			if n := len(eventsOf(p, nodepoolv1.EventRolloutDeferred)); n != 1 {
				t.Errorf("%d RolloutDeferred events, want 1: %+v\n%s", n, eventsOf(p, nodepoolv1.EventRolloutDeferred), w.Trace())
			}
		})
	}
}
