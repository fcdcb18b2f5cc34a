package scenario

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// The drain policy (spec.management.drain) against a PodDisruptionBudget
// that allows no eviction (the drain knob, Pool.DrainBlocked): Wait, Force
// and Halt, with a canary, a maintenance window, a fleet rollout and an
// InPlace pool. Cluster API counts a deleting machine in its MachineSet
// until it is gone, so a blocked drain holds the old node (and its pods)
// and the Replace rollout with it: no surge beyond maxSurge is made while
// the node drains.

func drainPolicy(on nodepoolv1.DrainTimeoutPolicy, timeout time.Duration) func(*nodepoolv1.NodePool) {
	return func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Drain = &nodepoolv1.Drain{OnTimeout: on, Timeout: &metav1.Duration{Duration: timeout}}
	}
}

func blockedDrains(p *Pool) []nodepoolv1.NodeDrainStatus {
	var out []nodepoolv1.NodeDrainStatus
	for _, d := range p.Obj.Status.Drains {
		if d.Blocked {
			out = append(out, d)
		}
	}
	return out
}

func TestScenarioWaitKeepsABlockedDrainUntilTheBudgetAllowsIt(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainWait, 30*time.Minute)})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour)
	if len(p.Draining) != 1 || len(blockedDrains(p)) != 1 || blockedDrains(p)[0].Pods[0].Budget != GuardedBudget {
		t.Fatalf("draining %d, status.drains %+v: want the first old machine held, reported blocked by %s, and the rollout stopped on it\n%s", len(p.Draining), p.Obj.Status.Drains, GuardedBudget, w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Draining) != 0 || len(p.Obj.Status.Drains) != 0 {
		t.Errorf("drains left: %+v", p.Obj.Status.Drains)
	}
}

func TestScenarioForceDeletesABlockedMachineAfterTheTimeout(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainForce, 30*time.Minute)})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 25*time.Minute)
	if len(p.Draining) != 1 {
		t.Fatalf("%d draining 25m after the edit, want the first old machine draining\n%s", len(p.Draining), w.Trace())
	}
	first := p.Draining[0].Name
	run(t, w, 20*time.Minute)
	if len(p.Draining) != 1 || p.Draining[0].Name == first {
		t.Fatalf("draining %v 45m after the edit, want %s forced at its 30m timeout and the second old machine draining\n%s", p.Draining, first, w.Trace())
	}
	run(t, w, 45*time.Minute)
	if len(p.Draining) != 0 || len(p.Obj.Status.Drains) != 0 {
		t.Fatalf("%d draining 90m after the edit, want both forced at their 30m timeout\n%s", len(p.Draining), w.Trace())
	}
	wantAllOn(t, w, p, latestHash(p))
	// Cluster API forces a drain at the timeout, when the controller looks
	// again too: whichever comes first, each forced node is said once.
	if got := eventsOf(p, nodepoolv1.EventDrainBlocked); len(got) != 2 || !strings.Contains(got[0].Message, "forcing it (onTimeout Force)") || got[0].Message == got[1].Message {
		t.Errorf("DrainBlocked events %+v, want one for each of the 2 forced nodes\n%s", got, w.Trace())
	}
}

// With a canary, a drain halt stops the rollout where the canary's round
// left it: no further old machine is taken down while it holds.
func TestScenarioHaltStopsACanaryRolloutOnABlockedDrainAndAResumeLetsItFinish(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 10*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		drainPolicy(nodepoolv1.DrainHalt, 30*time.Minute)(np)
	}})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 4*time.Hour)
	c := p.Condition(nodepoolv1.ConditionRolloutHealthy)
	if c == nil || c.Reason != nodepoolv1.ReasonDrainHalted || !strings.Contains(c.Message, GuardedBudget) || p.Recorded(nodepoolv1.AnnotationDrainHalted) == "" || !p.MD.Paused {
		t.Fatalf("RolloutHealthy %+v, halt %q, paused %v: want halted on the drain\n%s", c, p.Recorded(nodepoolv1.AnnotationDrainHalted), p.MD.Paused, w.Trace())
	}
	if len(p.Draining) != 1 || len(p.Machines) != 3 {
		t.Errorf("%d draining, %d machines: want the halt to keep the blocked old node and take down no other\n%s", len(p.Draining), len(p.Machines), w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again; a person resumes", func(*World) {
		p.UnblockDrains()
		rollout.Resume(p.Obj)
	})
	run(t, w, 3*time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	if c := p.Condition(nodepoolv1.ConditionRolloutHealthy); len(p.Draining) != 0 || p.MD.Paused || c == nil || c.Reason == nodepoolv1.ReasonDrainHalted {
		t.Errorf("after the resume: %d draining, paused %v, RolloutHealthy %+v\n%s", len(p.Draining), p.MD.Paused, c, w.Trace())
	}
}

// A drain still blocked when the maintenance window closes is not cut
// short: the drain goes on, and no other machine is replaced outside the
// window (the invariants check every step).
func TestScenarioADrainBlockedWhenTheWindowClosesWaitsAndNothingElseRollsOutsideIt(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
		drainPolicy(nodepoolv1.DrainWait, 30*time.Minute)(np)
	}})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 24*time.Hour)
	if len(p.History) != 2 || len(p.Draining) != 1 || len(blockedDrains(p)) != 1 {
		t.Fatalf("%d records, %d draining: want the window's rollout started and its drain still blocked the next day\n%s", len(p.History), len(p.Draining), w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, 2*24*time.Hour)
	wantAllOn(t, w, p, latestHash(p))
}

// A pool halted on a drain counts as failed for a fleet rollout's stopOn.
func TestScenarioAFleetRolloutHaltsOnAPoolHaltedByADrain(t *testing.T) {
	w := New(t0)
	pools, f := fleetOf(t, w, 3, nil, nodepoolv1.FleetRolloutSpec{
		Action: nodepoolv1.FleetActionApplyPending,
		Waves:  []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
		Soak:   &metav1.Duration{Duration: time.Hour},
	})
	pools[0].DrainBlocked = true
	drainPolicy(nodepoolv1.DrainHalt, 30*time.Minute)(pools[0].Obj)
	run(t, w, 6*time.Hour)
	if f.Status.Phase != nodepoolv1.FleetPhaseHalted {
		t.Fatalf("%s, want Halted on the drain-halted pool p0 (RolloutHealthy %+v, drains %+v)\n%s", f.State(), pools[0].Condition(nodepoolv1.ConditionRolloutHealthy), pools[0].Obj.Status.Drains, w.Trace())
	}
	for _, p := range pools[1:] {
		if n := len(fleetRecordsOf(p, "bump")); n != 0 {
			t.Errorf("pool %s of wave 2 rolled while the fleet rollout was halted\n%s", p.Name, w.Trace())
		}
	}
}

// Cluster API counts a machine it is deleting in its MachineSet until the
// machine is gone (status.replicas, and the MachineDeployment's replicas +
// maxSurge), so while an old node of a 2-machine pool cannot be drained the
// rollout stops: one surge machine, one old machine draining, the other old
// machine serving, the rollout not complete (test/drain confirms it on the
// real stack).
func TestScenarioATwoMachineReplaceRolloutStopsWhileAnOldNodeCannotBeDrained(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: drainPolicy(nodepoolv1.DrainWait, 30*time.Minute)})
	old := map[string]bool{}
	for _, m := range p.Machines {
		old[m.Name] = true
	}
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour)
	fresh, serving := 0, 0
	for _, m := range p.Machines {
		if old[m.Name] {
			serving++
		} else {
			fresh++
		}
	}
	settled := p.Obj.Status.Rollout != nil && p.Obj.Status.Rollout.Settled
	if len(p.Draining) != 1 || fresh != 1 || serving != 1 || settled {
		t.Fatalf("%d draining, %d new, %d old serving, settled %v: want the rollout stopped on the one blocked drain\n%s", len(p.Draining), fresh, serving, settled, w.Trace())
	}
	w.After(time.Minute, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Machines) != 2 || len(p.Draining) != 0 {
		t.Errorf("%d machines, %d draining after the budget allows evictions, want 2 new and none draining\n%s", len(p.Machines), len(p.Draining), w.Trace())
	}
}

// InPlace: the controller's own drain; Halt keeps the node cordoned with
// its pod and starts no other node.
func TestScenarioHaltStopsAnInPlaceUpdateOnABlockedDrain(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
		drainPolicy(nodepoolv1.DrainHalt, 30*time.Minute)(np)
	}})
	p.DrainBlocked = true
	w.After(time.Minute, "owner edits the config", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour)
	if c := p.Condition(nodepoolv1.ConditionRolloutHealthy); c == nil || c.Reason != nodepoolv1.ReasonDrainHalted {
		t.Fatalf("RolloutHealthy %+v, want DrainHalted\n%s", c, w.Trace())
	}
	draining, idle := 0, 0
	for _, m := range p.Machines {
		switch m.Phase {
		case nodepoolv1.UpdatePhaseDraining:
			draining++
		case "":
			idle++
		}
	}
	if draining != 1 || idle != 1 {
		t.Errorf("%d draining, %d untouched: want the halted node kept draining and the other not started\n%s", draining, idle, w.Trace())
	}
}
