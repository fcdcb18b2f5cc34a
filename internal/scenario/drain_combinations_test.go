package scenario

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Drains meet every other rule: the health gate's halt and rollback, the
// drift deadline, a pause, forced requests, auto repair and controller
// restarts. The drain knob (Pool.DrainBlocked) is a PodDisruptionBudget
// that allows no eviction; the invariants are checked at every step.

func eventsOf(p *Pool, reason string) []rollout.Event {
	var out []rollout.Event
	for _, e := range p.Events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func draining(p *Pool) []string {
	var out []string
	for _, m := range p.Draining {
		out = append(out, m.Name)
	}
	return out
}

// A payload that fails its soak after the canary passed, while an old
// node's drain is blocked (maxSurge 2 made the round's new machines before
// it), halts the rollout as the health gate does: the drain goes on being
// reported, and once it ends no further old machine goes while the halt
// holds.
func TestScenarioAFailedSoakHaltsTheRolloutWhileAnOldNodeStillDrains(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
		np.Spec.Management.Health = health(1, 10*time.Minute, 30*time.Minute, nodepoolv1.FailurePolicyHalt)
		drainPolicy(nodepoolv1.DrainWait, 5*time.Minute)(np)
	}})
	old := latestHash(p)
	p.DrainBlocked = true
	badConfig(w, "c2", 20*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 20m)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 2*time.Hour)
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %q, want Halted by the failed canary\n%s", p.Phase(), w.Trace())
	}
	if c := p.Condition(nodepoolv1.ConditionRolloutHealthy); c == nil || c.Reason == nodepoolv1.ReasonDrainHalted {
		t.Errorf("RolloutHealthy %+v: Wait never halts on a drain; the health gate's halt is the one reported", c)
	}
	if len(p.Draining) == 0 || len(blockedDrains(p)) != len(p.Draining) || len(eventsOf(p, nodepoolv1.EventDrainBlocked)) != len(p.Draining) {
		t.Fatalf("draining %v, status.drains %+v, %d DrainBlocked events: want the old node's drain reported blocked, once\n%s",
			draining(p), p.Obj.Status.Drains, len(eventsOf(p, nodepoolv1.EventDrainBlocked)), w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, 2*time.Hour) // AHaltHolds: no further old machine goes
	if len(p.Draining) != 0 || len(p.Obj.Status.Drains) != 0 || p.Phase() != rollout.HealthHalted {
		t.Errorf("after the budget allowed it: draining %v, status.drains %+v, phase %q; want the drain done and the halt holding\n%s", draining(p), p.Obj.Status.Drains, p.Phase(), w.Trace())
	}
	if onPayloads(p)[old] == 0 {
		t.Errorf("no machine left on the healthy payload: the halt did not hold\n%s", w.Trace())
	}
}

// rollbackOfABlockedCanary is a 3-machine pool with a rollback health gate
// and drain policy on (timeout 20m) whose budget refuses every eviction,
// and an owner change to a config that turns nodes unhealthy after 10m:
// the canary fails and the rollback drains it. old is the healthy payload.
func rollbackOfABlockedCanary(t *testing.T, on nodepoolv1.DrainTimeoutPolicy) (w *World, p *Pool, old string) {
	t.Helper()
	w = New(t0)
	p = settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
		drainPolicy(on, 20*time.Minute)(np)
	}})
	old = latestHash(p)
	p.DrainBlocked = true
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	return w, p, old
}

// A rollback's own drains meet the budget too: the failed canary's node
// is held by it and the rollback waits on it (Cluster API counts the
// deleting machine); Force deletes it at the timeout, and the rollback
// completes with every machine on the healthy payload.
func TestScenarioARollbackDrainsTheFailedCanaryAndForceDeletesItAtTheTimeout(t *testing.T) {
	w, p, old := rollbackOfABlockedCanary(t, nodepoolv1.DrainForce)
	run(t, w, 30*time.Minute)
	if p.Phase() != rollout.HealthRollingBack || len(p.Draining) != 1 || p.Draining[0].Payload == old || len(p.Obj.Status.Drains) != 1 {
		t.Fatalf("phase %q, draining %v, status.drains %+v: want the rollback waiting on the failed canary's drain, reported\n%s", p.Phase(), draining(p), p.Obj.Status.Drains, w.Trace())
	}
	since := p.Draining[0].DrainSince
	run(t, w, 30*time.Minute)
	if p.Phase() != rollout.HealthRolledBack || len(p.Draining) != 0 || len(p.Obj.Status.Drains) != 0 || p.MD.Paused {
		t.Fatalf("phase %q, draining %v, status.drains %+v, paused %v: want the canary's drain forced after 20m (it started at %s), the rollback done\n%s", p.Phase(), draining(p), p.Obj.Status.Drains, p.MD.Paused, since.Format(time.RFC3339), w.Trace())
	}
	wantAllOn(t, w, p, old)
	wantRecord(t, w, p, rollout.InitiatorRollback, OutcomeComplete)
}

// With Halt, the rollback's blocked drain of the failed canary halts too:
// the rollback is a rollout like any other. The machines are back on the
// healthy payload, the failed node is kept with its pods, the
// MachineDeployment paused and RolloutHealthy names the pod, until the
// budget allows the eviction and a person resumes.
func TestScenarioARollbackHaltsOnTheFailedCanarysBlockedDrainWithHalt(t *testing.T) {
	w, p, old := rollbackOfABlockedCanary(t, nodepoolv1.DrainHalt)
	run(t, w, 4*time.Hour)
	wantAllOn(t, w, p, old)
	c := p.Condition(nodepoolv1.ConditionRolloutHealthy)
	if len(p.Draining) != 1 || p.Draining[0].Payload == old || c == nil || c.Reason != nodepoolv1.ReasonDrainHalted ||
		!strings.Contains(c.Message, guardedPod(p.Draining[0])) || !p.MD.Paused || len(eventsOf(p, nodepoolv1.ReasonDrainHalted)) != 1 {
		t.Fatalf("draining %v, RolloutHealthy %+v, paused %v, %d DrainHalted events: want the failed canary kept, halted on once, naming its pod\n%s",
			draining(p), c, p.MD.Paused, len(eventsOf(p, nodepoolv1.ReasonDrainHalted)), w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again; a person resumes", func(*World) {
		p.UnblockDrains()
		p.Resumed()
	})
	run(t, w, time.Hour)
	wantAllOn(t, w, p, old)
	if c := p.Condition(nodepoolv1.ConditionRolloutHealthy); len(p.Draining) != 0 || p.MD.Paused || c == nil || c.Reason == nodepoolv1.ReasonDrainHalted {
		t.Errorf("after the resume: draining %v, paused %v, RolloutHealthy %+v\n%s", draining(p), p.MD.Paused, c, w.Trace())
	}
}

// The drift deadline's rollout meets blocked drains: it waits on each,
// Force cuts each at the timeout, and the deadline's rollout completes
// inside the window.
func TestScenarioTheDriftDeadlinesRolloutForcesBlockedDrainsInTheWindow(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 24 * time.Hour}
		drainPolicy(nodepoolv1.DrainForce, 30*time.Minute)(np)
	}})
	p.DrainBlocked = true
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	inWindow := time.Date(2026, 12, 2, 2, 50, 0, 0, time.UTC) // the deadline passed on Dec 1 at 12:31Z; the next window is 01:00–03:00Z
	if err := w.Run(inWindow); err != nil {
		t.Fatalf("%v\n%s", err, w.Trace())
	}
	wantRecord(t, w, p, rollout.InitiatorDeadline, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Draining) != 0 || len(p.Obj.Status.PendingManagementChanges) != 0 {
		t.Errorf("draining %v, drift %+v by the window's end: want both blocked drains forced at their 30m timeout, one after the other, and the drift applied\n%s",
			draining(p), p.Obj.Status.PendingManagementChanges, w.Trace())
	}
	run(t, w, 24*time.Hour)
	if len(p.History) != 2 {
		t.Errorf("%d records, want the deadline's rollout only\n%s", len(p.History), w.Trace())
	}
}

// A pause does not stop a rollout in progress, nor its drains: a drain
// blocked past its timeout halts the rollout during the pause. The owner's
// next change waits for the pause to end; then the drain, still blocked,
// holds the new rollout too (Cluster API counts the deleting machine), so
// it halts that one as well, until the budget allows the eviction and a
// person resumes.
func TestScenarioAPauseNeitherStopsABlockedDrainNorItsHaltAndTheNextChangeWaitsForIt(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainHalt, 20*time.Minute)})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(10*time.Minute, "owner pauses the pool for 6h", func(w *World) {
		p.Obj.Spec.Management.PausedUntil = w.Now.Add(6 * time.Hour).UTC().Format(time.RFC3339)
	})
	w.After(time.Hour, "owner edits the config to c3", func(*World) { p.Inputs.Config = "c3" })
	run(t, w, 3*time.Hour)
	c := p.Condition(nodepoolv1.ConditionRolloutHealthy)
	if c == nil || c.Reason != nodepoolv1.ReasonDrainHalted || !p.MD.Paused || len(p.Draining) != 1 {
		t.Fatalf("RolloutHealthy %+v, paused %v, draining %v: want the drain halt during the pause, the old node kept\n%s", c, p.MD.Paused, draining(p), w.Trace())
	}
	if n := onPayloads(p)[latestHash(p)]; n != 0 || len(p.History) != 2 {
		t.Fatalf("%d machines on c3, %d records during the pause: want the owner's change held by it\n%s", n, len(p.History), w.Trace())
	}
	run(t, w, 3*time.Hour+20*time.Minute) // the pause ended 10m ago
	if n := onPayloads(p)[latestHash(p)]; n != 0 || len(p.History) != 3 || !p.MD.Paused || len(eventsOf(p, nodepoolv1.ReasonDrainHalted)) != 2 || len(p.Draining) != 1 {
		t.Fatalf("%d machines on c3, %d records, paused %v, %d DrainHalted events, draining %v after the pause: want the new rollout started and halted by the drain that still holds it\n%s",
			n, len(p.History), p.MD.Paused, len(eventsOf(p, nodepoolv1.ReasonDrainHalted)), draining(p), w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again; a person resumes", func(*World) {
		p.UnblockDrains()
		p.Resumed()
	})
	run(t, w, 2*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Draining) != 0 || p.MD.Paused {
		t.Errorf("draining %v, paused %v after the resume\n%s", draining(p), p.MD.Paused, w.Trace())
	}
}

// A drain halt holds a forced request (`rollout restart`) of the rollout
// it halted until a person resumes the pool, as a health halt does: the
// decision says so, and nothing is replaced meanwhile. After the resume
// the restart replaces every machine.
func TestScenarioADrainHaltHoldsAForcedRestartUntilAResume(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainHalt, 20*time.Minute)})
	p.DrainBlocked = true
	var restart time.Time
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(time.Hour, "owner restarts the pool", func(w *World) {
		restart = w.Now.Truncate(time.Second)
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: restart}
	})
	var held rollout.Decision
	w.After(90*time.Minute, "look at the decision", func(*World) { held = p.LastPlan().Decision })
	run(t, w, 3*time.Hour)
	if held.Action != rollout.ActionHold || held.Forced == nil || held.Forced.State != rollout.ForcedHalted ||
		!strings.Contains(held.Reason, "did not drain") || !strings.Contains(held.Reason, "resume") {
		t.Fatalf("decision %s (%+v): %q; want the restart held by the drain halt, saying how to resume\n%s", held.Action, held.Forced, held.Reason, w.Trace())
	}
	if len(p.History) != 2 || held.Standing.Phase != rollout.PhaseHalted {
		t.Fatalf("%d records, phase %s: want the restart not started while halted\n%s", len(p.History), held.Standing.Phase, w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again; a person resumes", func(*World) {
		p.UnblockDrains()
		p.Resumed()
	})
	run(t, w, 2*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorRestart, OutcomeComplete)
	for _, m := range p.Machines {
		if m.Created.Before(restart) {
			t.Errorf("machine %s created %s, before the restart at %s\n%s", m.Name, m.Created.Format(time.RFC3339), restart.Format(time.RFC3339), w.Trace())
		}
	}
}

// Auto repair is not a rollout: while a rollout is halted on a blocked
// drain, the MachineHealthCheck still replaces the new machine whose node
// went NotReady (its MachineSet makes the replacement; the paused
// MachineDeployment does not stop it, and a repair is not held by the
// budget), and the halt still holds the old node and every other machine.
func TestScenarioAutoRepairReplacesAnUnhealthyMachineWhileTheRolloutIsHaltedOnADrain(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
		drainPolicy(nodepoolv1.DrainHalt, 20*time.Minute)(np)
	}})
	old := latestHash(p)
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	var sick string
	w.After(time.Hour, "the new machine's node turns NotReady", func(w *World) {
		for _, m := range p.Machines {
			if m.Payload != old {
				sick, m.UnhealthyAt = m.Name, w.Now
			}
		}
		p.touch()
	})
	run(t, w, 2*time.Hour)
	c := p.Condition(nodepoolv1.ConditionRolloutHealthy)
	if c == nil || c.Reason != nodepoolv1.ReasonDrainHalted || !p.MD.Paused || len(p.Draining) != 1 || sick == "" {
		t.Fatalf("RolloutHealthy %+v, paused %v, draining %v, sick %q: want the rollout halted, the old node kept\n%s", c, p.MD.Paused, draining(p), sick, w.Trace())
	}
	if on := onPayloads(p); len(p.Machines) != 3 || on[old] != 2 || on[latestHash(p)] != 1 {
		t.Fatalf("machines %v: want the 2 old ones serving and 1 new one, the replacement\n%s", on, w.Trace())
	}
	for _, m := range append(append([]*Machine{}, p.Machines...), p.Draining...) {
		if m.Name == sick {
			t.Fatalf("%s is still there: the MachineHealthCheck did not replace it during the halt, or the budget held it\n%s", sick, w.Trace())
		}
	}
}

// Controller restarts before and after a drain's timeout change nothing:
// the drain is reported blocked once, the halt recorded once and held.
func TestScenarioARestartedControllerKeepsADrainHaltAndSaysItOnce(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainHalt, 20*time.Minute)})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	for _, d := range []time.Duration{10 * time.Minute, 25 * time.Minute, time.Hour, 2 * time.Hour} {
		w.After(d, "the controller restarts", func(w *World) { w.Restart() })
	}
	run(t, w, 3*time.Hour)
	blocked, halted := eventsOf(p, nodepoolv1.EventDrainBlocked), eventsOf(p, nodepoolv1.ReasonDrainHalted)
	if len(blocked) != 1 || len(halted) != 1 {
		t.Errorf("%d DrainBlocked and %d DrainHalted events across 4 restarts: want one of each (the rollout waits on the one blocked node)\n%v\n%s", len(blocked), len(halted), p.Events, w.Trace())
	}
	if c := p.Condition(nodepoolv1.ConditionRolloutHealthy); c == nil || c.Reason != nodepoolv1.ReasonDrainHalted || !p.MD.Paused || len(p.Draining) != 1 || len(blockedDrains(p)) != 1 {
		t.Errorf("RolloutHealthy %+v, paused %v, draining %v, status.drains %+v: want the halt held across the restarts\n%s", c, p.MD.Paused, draining(p), p.Obj.Status.Drains, w.Trace())
	}
	if len(halted) == 1 && !strings.Contains(halted[0].Message, guardedPod(p.Draining[0])) {
		t.Errorf("DrainHalted %q does not name the pod that held the node", halted[0].Message)
	}
}
