package scenario

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"slices"
	"strings"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

// A rollout is a thing with an identity: its halts and its rollback
// belong to it and end with it. Each scenario failed on the engine before
// its fix.

// bootedConfig reports whether any machine of p boots a payload whose
// user configs are config.
func bootedConfig(p *Pool, config string) []string {
	var on []string
	for _, m := range p.Machines {
		if pl, ok := p.Payloads[m.Payload]; ok && slices.Contains(Values(pl), "user-configs="+config) {
			on = append(on, m.Name)
		}
	}
	return on
}

// rolledBackPool is a pool of 3 whose change to c2 failed its canary and
// was rolled back to c1.
func rolledBackPool(t *testing.T, w *World) *Pool {
	t.Helper()
	p := failedPool(t, w, nodepoolv1.FailurePolicyRollback, 2*time.Hour, rollout.HealthRolledBack)
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Fatalf("machines %v boot c2 after the rollback\n%s", on, w.Trace())
	}
	return p
}

// failedPool is a pool of 3 whose change to c2 (health-gated under
// policy) failed its canary, in phase want after d.
func failedPool(t *testing.T, w *World, policy nodepoolv1.FailurePolicy, d time.Duration, want rollout.HealthPhase) *Pool {
	t.Helper()
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, policy)
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, d)
	if p.Phase() != want {
		t.Fatalf("phase %q, want %s\n%s", p.Phase(), want, w.Trace())
	}
	return p
}

// Defect 1: a forced rollout after a rollback (apply-pending of a
// platform bump) replaces every machine onto the rolled-back revision's
// own configuration with the latest platform, never onto the payload that
// failed.
func TestScenarioAForcedRolloutAfterARollbackKeepsTheRollback(t *testing.T) {
	w := New(t0)
	p := rolledBackPool(t, w)
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	w.After(10*time.Minute, "owner scales to 5", func(*World) { p.Obj.Spec.Replicas = ptrInt(5) })
	run(t, w, 3*time.Hour)
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the configuration that failed (c2) after a forced rollout\n%s", on, w.Trace())
	}
	for _, m := range p.Machines {
		pl := p.Payloads[m.Payload]
		if pl == nil || !slices.Contains(Values(pl), "renderer=r2") {
			t.Errorf("machine %s does not run the renderer the forced rollout applied (r2)\n%s", m.Name, w.Trace())
		}
	}
}

// Defect 1, NewNodes: after a rollback, scale-ups of a NewNodes pool boot
// the rolled-back revision with the latest platform.
func TestScenarioNewNodesAfterARollbackBootTheRolledBackRevision(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(2*time.Hour, "owner scales to 4", func(*World) { p.Obj.Spec.Replicas = ptrInt(4) })
	run(t, w, 3*time.Hour)
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the configuration that failed (c2)\n%s", on, w.Trace())
	}
}

// Defect 2: a halt ends with its rollout. The same change applied again
// later (after an undo and a fix elsewhere) is a new rollout: it starts
// clean, its canary is made on it and it completes.
func TestScenarioTheSameChangeAppliedAgainStartsClean(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(time.Hour, "owner undoes: config c1", func(*World) { p.Inputs.Config = "c1" })
	w.After(3*time.Hour, "the fault elsewhere is fixed; owner applies c2 again", func(w *World) {
		delete(w.Bad, "user-configs=c2")
		p.Inputs.Config = "c2"
	})
	run(t, w, 6*time.Hour)
	if p.Phase() == rollout.HealthHalted {
		t.Errorf("the same change applied again is halted by the halt of its earlier rollout\n%s", w.Trace())
	}
	if got := onPayloads(p)[latestHash(p)]; got != 3 {
		t.Errorf("%d of 3 machines on c2 applied again, want all\n%s", got, w.Trace())
	}
	if v := p.Recorded(nodepoolv1.AnnotationHalted) + p.Annotation(nodepoolv1.AnnotationHalted); v != "" {
		t.Errorf("the ended halt is still recorded: %s", v)
	}
}

// Defect 2 with a rollback: the change rolled back and applied again later
// is a new rollout too.
func TestScenarioAChangeRolledBackAndAppliedAgainRollsOut(t *testing.T) {
	w := New(t0)
	p := rolledBackPool(t, w)
	w.After(time.Minute, "owner undoes: config c1", func(*World) { p.Inputs.Config = "c1" })
	w.After(time.Hour, "the fault is fixed; owner applies c2 again", func(w *World) {
		delete(w.Bad, "user-configs=c2")
		p.Inputs.Config = "c2"
	})
	run(t, w, 4*time.Hour)
	if got := onPayloads(p)[latestHash(p)]; got != 3 {
		t.Errorf("%d of 3 machines on c2 applied again, want all (phase %s)\n%s", got, p.Phase(), w.Trace())
	}
}

// Defect 3: a drain outside any rollout (a scale-down) is reported but
// never halts or pauses the pool, with drain.onTimeout Halt.
func TestScenarioADrainOutsideARolloutNeverHaltsThePool(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: drainPolicy(nodepoolv1.DrainHalt, 10*time.Minute)})
	w.After(time.Minute, "a PodDisruptionBudget allows no eviction; owner scales to 2", func(*World) {
		p.DrainBlocked = true
		p.Obj.Spec.Replicas = ptrInt(2)
	})
	var during *rollout.Plan
	w.After(time.Hour, "look", func(*World) { during = p.LastPlan() })
	w.After(2*time.Hour, "the budget allows evictions again; owner scales to 4", func(*World) {
		p.UnblockDrains()
		p.Obj.Spec.Replicas = ptrInt(4)
	})
	run(t, w, 3*time.Hour)
	if during == nil || during.MachineDeployment == nil || during.MachineDeployment.Paused {
		t.Errorf("the MachineDeployment is paused by a scale-down's drain\n%s", w.Trace())
	}
	if d := during.Decision.Drain; d != nil && d.Halt != nil {
		t.Errorf("a scale-down's drain halts the pool: %+v\n%s", d.Halt, w.Trace())
	}
	if v := p.Recorded(nodepoolv1.AnnotationDrainHalted) + p.Annotation(nodepoolv1.AnnotationDrainHalted); v != "" {
		t.Errorf("a drain halt is recorded for no rollout: %s", v)
	}
	if n := len(p.Machines); n != 4 {
		t.Errorf("%d machines after the scale-up to 4\n%s", n, w.Trace())
	}
	if !strings.Contains(w.Trace(), "DrainBlocked") && len(eventsOf(p, nodepoolv1.EventDrainBlocked)) == 0 {
		t.Errorf("the blocked drain is not said\n%s", w.Trace())
	}
}

// Seed 77: a scale-up during a canary puts no machine beyond the canary
// on the untested payload.
func TestScenarioAScaleUpDuringACanaryBootsTheTestedPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(10*time.Minute, "owner scales to 4", func(*World) { p.Obj.Spec.Replicas = ptrInt(4) })
	run(t, w, 3*time.Hour) // NoMoreThanCanaryOnAnUntestedPayload
	if got := onPayloads(p)[latestHash(p)]; got != 4 {
		t.Errorf("%d of 4 machines on c2 once its canary passed\n%s", got, w.Trace())
	}
}

// gatedNightly is a nightly window (02:00-04:00 Europe/Berlin) that holds
// the owner's changes too.
func gatedNightly(np *nodepoolv1.NodePool) {
	nightly(np)
	np.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
}

// Seed 103: an owner change held by a maintenance window never reaches
// the machines made meanwhile, whatever the managementUpdates policy
// (NewNodes and Rollout serve the latest platform, not the owner's next
// configuration).
func TestScenarioAHeldOwnerChangeNeverReachesNewMachines(t *testing.T) {
	for _, policy := range []nodepoolv1.ManagementUpdatePolicy{nodepoolv1.ManagementUpdatesNewNodes, nodepoolv1.ManagementUpdatesRollout} {
		t.Run(string(policy), func(t *testing.T) {
			w := New(t0)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
				gatedNightly(np)
				np.Spec.Management.ManagementUpdates = policy
			}})
			w.After(time.Minute, "owner edits the config to c2 (held until the window)", func(*World) { p.Inputs.Config = "c2" })
			w.After(time.Hour, "owner scales to 4", func(*World) { p.Obj.Spec.Replicas = ptrInt(4) })
			run(t, w, 3*time.Hour)
			if on := bootedConfig(p, "c2"); len(on) > 0 {
				t.Errorf("machines %v boot the owner's held change c2 before its window\n%s", on, w.Trace())
			}
			if n := len(p.Machines); n != 4 {
				t.Errorf("%d machines after the scale-up to 4\n%s", n, w.Trace())
			}
		})
	}
}

// Seed 24 (defect 5): a halted InPlace pool's repaired machine boots the
// last healthy payload, never the one that failed, with NewNodes and an
// owner change that waited for its window.
func TestScenarioAHaltedInPlacePoolsRepairedMachineBootsTheLastHealthyPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		inPlace(np)
		gatedNightly(np)
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		np.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	}})
	old := latestHash(p)
	badConfig(w, "c2", 5*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 5m; held until the window)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 24*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %q, want Halted\n%s", p.Phase(), w.Trace())
	}
	if !strings.Contains(w.Trace(), "(repair)") {
		t.Fatalf("the failed node was not repaired\n%s", w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the payload that failed (c2) after the repair\n%s", on, w.Trace())
	}
	if got := onPayloads(p)[old]; got != 2 {
		t.Errorf("%d of 2 machines on the last healthy payload after the repair, want 2\n%s", got, w.Trace())
	}
}

// The records an older nodepool wrote keep their meaning: a forced
// rollout halted under a forced-from of two parts (no payload it boots)
// stays halted across the upgrade (a controller restart), its new
// machines boot the last healthy payload, and nothing is replaced.
func TestScenarioAnOlderForcedFromKeepsAHaltedPoolHalted(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	old := latestHash(p)
	w.Bad["renderer=r2"] = 10 * time.Minute
	w.After(time.Minute, "platform bumps the renderer to r2 (bad after 10m)", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	run(t, w, time.Hour)
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %q, want Halted\n%s", p.Phase(), w.Trace())
	}
	v := p.Recorded(nodepoolv1.AnnotationForcedFrom)
	parts := strings.Split(v, "/")
	if len(parts) != 3 {
		t.Fatalf("forced-from %q, want <rollout>/<before>/<forced>", v)
	}
	machines := map[string]bool{}
	for _, m := range p.Machines {
		machines[m.Name] = true
	}
	w.After(time.Minute, "nodepool upgrades: the record is as an older one wrote it; the controller restarts", func(w *World) {
		p.AsAnOlderNodepoolWroteIt()
		p.setAnnotation(nodepoolv1.AnnotationForcedFrom, parts[0]+"/"+parts[1])
		w.Restart()
	})
	w.After(30*time.Minute, "owner scales to 4", func(*World) { p.Obj.Spec.Replicas = ptrInt(4) })
	run(t, w, 2*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
	if p.Phase() != rollout.HealthHalted {
		t.Errorf("phase %q after the upgrade, want Halted\n%s", p.Phase(), w.Trace())
	}
	for _, m := range p.Machines {
		if !machines[m.Name] && m.Payload != old {
			t.Errorf("machine %s made after the upgrade boots %s, want the last healthy %s\n%s", m.Name, Short(m.Payload), Short(old), w.Trace())
		}
	}
	for name := range machines {
		found := false
		for _, m := range p.Machines {
			found = found || m.Name == name
		}
		if !found && !strings.Contains(w.Trace(), name+" deleted (repair)") {
			t.Errorf("machine %s was replaced across the upgrade\n%s", name, w.Trace())
		}
	}
}

// Seed 1111: an owner's change during a forced rollout's canary is a
// rollout of its own, and its canary holds a scale-up by the machines the
// pool keeps, never fewer: holding the MachineDeployment at the machines
// made before the restart's time made Cluster API delete the forced
// rollout's own machines, and each deletion lowered the count again, down
// to one machine.
func TestScenarioAChangeDuringAForcedCanaryNeverShrinksThePool(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 5, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 2*time.Hour, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner restarts the pool", func(w *World) {
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now.Truncate(time.Second)}
	})
	w.After(30*time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 6*time.Hour) // AHeldScaleUpNeverShrinksThePool
	if n := len(p.Machines); n != 5 {
		t.Errorf("%d machines, want 5\n%s", n, w.Trace())
	}
	if got := onPayloads(p)[latestHash(p)]; got != 5 {
		t.Errorf("%d of 5 machines on c2 once its canary passed\n%s", got, w.Trace())
	}
}

// Seed 1280: a forced rollout's canary is one of the machines it makes,
// never an earlier rollout's. The Rollout policy's platform rollout waits
// for the window with the bump's time as its rollout.after; a restart
// rolling meanwhile made machines after that time, which passed their
// soak under the restart. They belong to a MachineSet made before the
// bump, which Cluster API replaces: they are the platform rollout's old
// machines, not its passed canary.
func TestScenarioAForcedRolloutsCanaryIsItsOwnMachine(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
		np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
		np.Spec.Management.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		np.Spec.Management.Health = health(1, 20*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner restarts the pool", func(w *World) {
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now.Truncate(time.Second)}
	})
	w.After(5*time.Minute, "platform bumps the renderer to r2 (rolled in the window)", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	run(t, w, 36*time.Hour) // NoMoreThanCanaryOnAnUntestedPayload
	if got := onPayloads(p)[latestHash(p)]; got != 3 {
		t.Errorf("%d of 3 machines on r2 after the window\n%s", got, w.Trace())
	}
}

// Seed 1465: a restart during an owner change's canary is a forced
// rollout of a payload no canary passed; when it halts, new machines
// boot what the pool ran before the owner change, not the owner change's
// payload its token served when the restart began.
func TestScenarioARestartDuringACanaryHaltsBackToTheLastHealthyPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		np.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	}})
	old := latestHash(p)
	badConfig(w, "c2", 8*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 8m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(5*time.Minute, "owner restarts the pool", func(w *World) {
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now.Truncate(time.Second)}
	})
	run(t, w, 6*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %s, want the restart halted\n%s", p.Phase(), w.Trace())
	}
	if got := onPayloads(p)[old]; got < 1 {
		t.Errorf("no machine back on the last healthy payload %s\n%s", Short(old), w.Trace())
	}
}

// Defect 8: a fix waiting for its window is reported as waiting for the
// window, not as the halt it will end. A canary halted in a window; after
// the window the owner removed the bad configuration: nothing moves until
// the next window (the owner's changes are gated), and meanwhile the
// standing is Held until the window opens and UpdatingConfig says the
// change waits, not that the halted rollout is in progress.
func TestScenarioAFixWaitingForItsWindowIsHeldNotHalted(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		gatedNightly(np)
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m; held until the window)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 14*time.Hour) // into the window: the canary halts
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %s, want the canary halted in the window\n%s", p.Phase(), w.Trace())
	}
	run(t, w, 2*time.Hour) // the window closed
	w.After(time.Minute, "owner undoes the config (c1, held until the next window)", func(*World) { p.Inputs.Config = "c1" })
	run(t, w, time.Hour)
	s := p.LastPlan().Decision.Standing
	if s.Phase != rollout.PhaseHeld || s.Hold == nil || s.Hold.Until.IsZero() {
		t.Fatalf("standing %s (%s), want Held until the next window\n%s", s.Phase, s.Message, w.Trace())
	}
	if c := p.Condition(nodepoolv1.ConditionUpdatingConfig); c == nil || c.Reason == nodepoolv1.ReasonRolloutInProgress {
		t.Errorf("UpdatingConfig %+v, want it to say the change waits", c)
	}
	run(t, w, 24*time.Hour)
	if got := onPayloads(p)[latestHash(p)]; got != 3 {
		t.Errorf("%d of 3 machines on c1 after the next window\n%s", got, w.Trace())
	}
}

// Seed 222: an InPlace node still draining for a rollout that a later
// rollout superseded belongs to no rollout once the pool's machines run
// the new target's configuration: its blocked drain is reported, never a
// halt of the new rollout, which is complete.
func TestScenarioAnInPlaceDrainOfASupersededRolloutHaltsNothing(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		inPlace(np)
		drainPolicy(nodepoolv1.DrainHalt, 30*time.Minute)(np)
	}})
	w.After(time.Minute, "a PodDisruptionBudget allows no eviction; owner edits the config to c2", func(*World) {
		p.DrainBlocked = true
		p.Inputs.Config = "c2"
	})
	w.After(10*time.Minute, "owner edits the config back to c1", func(*World) { p.Inputs.Config = "c1" })
	var after *rollout.Plan
	w.After(time.Hour, "look", func(*World) { after = p.LastPlan() })
	run(t, w, 2*time.Hour) // NoHaltOrPauseWithoutARollout
	if after == nil {
		t.Fatalf("no plan\n%s", w.Trace())
	}
	if d := after.Decision.Drain; d != nil && d.Halt != nil {
		t.Errorf("the drain of a superseded rollout halts the pool: %+v\n%s", d.Halt, w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v run c2 after the owner went back to c1\n%s", on, w.Trace())
	}
}

// Seed 923: a halted InPlace rollout is not complete when a scale-down
// leaves only machines made from its template meanwhile (a repair booted
// them the last healthy payload): it stays halted and on record in
// progress until the owner changes the pool or a person resumes it.
func TestScenarioAHaltedInPlaceRolloutNeverCompletesByAScaleDown(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		inPlace(np)
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		np.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	}})
	badConfig(w, "c2", 5*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 5m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(3*time.Hour, "owner scales to 1", func(*World) { p.Obj.Spec.Replicas = ptrInt(1) })
	run(t, w, 5*time.Hour) // NoHaltOrPauseWithoutARollout
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %q, want Halted\n%s", p.Phase(), w.Trace())
	}
	if !strings.Contains(w.Trace(), "(repair)") {
		t.Fatalf("the failed node was not repaired\n%s", w.Trace())
	}
	last := p.History[len(p.History)-1]
	if last.Outcome != OutcomeInProgress {
		t.Errorf("the halted rollout (revision %d) is on record %s, want InProgress\n%s", last.Revision, last.Outcome, w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the payload that failed (c2)\n%s", on, w.Trace())
	}
}

// Seed 1700: a forced rollout that carried an owner change failed its
// canary and rolled back. Machines made while the pool rolls back (when
// the failed rollout had replaced some, the previous revision's
// MachineSet makes them again) boot what the old machines ran, never the
// latest platform the NewNodes policy serves a settled pool: no canary
// tested that.
func TestScenarioARollbackOfAForcedRolloutBootsWhatTheOldMachinesRan(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
	}})
	old := latestHash(p)
	badConfig(w, "c2", 5*time.Minute)
	w.After(time.Minute, "platform bumps the proxy defaults to p2", func(*World) { p.Inputs.Platform[CompProxyDefaults] = "p2" })
	w.After(2*time.Minute, "owner edits the config to c2 (bad after 5m); person runs apply-pending", func(*World) {
		p.Inputs.Config = "c2"
		ApplyPending(p, "")
	})
	var during []string
	w.Done = func(*World) bool {
		if r := lastRecord(p); r.Initiator != rollout.InitiatorRollback || r.Outcome != OutcomeInProgress {
			return false
		}
		for _, m := range p.Machines {
			if m.Payload != old && !slices.Contains(Values(p.Payloads[m.Payload]), "user-configs=c2") {
				during = append(during, m.Name+" boots "+Short(m.Payload))
			}
		}
		return false
	}
	run(t, w, 3*time.Hour)
	if p.Phase() != rollout.HealthRolledBack {
		t.Fatalf("phase %q, want RolledBack\n%s", p.Phase(), w.Trace())
	}
	if len(during) > 0 {
		t.Errorf("while the pool rolled back, %v: not what the old machines ran (%s)\n%s", during, Short(old), w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the configuration that failed (c2)\n%s", on, w.Trace())
	}
}

// Seeds 2080, 5634: an owner's rollout carries the platform drift (its
// target boots the latest platform), so the drift is not pending while it
// rolls. When its canary failed and the pool rolled back, the drift came
// back as new: its deadline counted again from the rollback. The drift's
// age belongs to what the nodes run, and a rollout that carried it and
// ended without applying it leaves that age as it was.
func TestScenarioARolledBackRolloutKeepsTheDriftsAge(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
		np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{DriftDeadline: &metav1.Duration{Duration: 24 * time.Hour}}
	}})
	badConfig(w, "c2", 5*time.Minute)
	var bumped, since time.Time
	w.After(time.Minute, "platform bumps the renderer to r2", func(w *World) {
		p.Inputs.Platform[CompRenderer] = "r2"
		bumped = w.Now
	})
	w.After(2*time.Hour, "owner edits the config to c2 (bad after 5m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(12*time.Hour, "look at the drift's since", func(*World) {
		for _, r := range p.Obj.Status.PendingManagementChanges {
			if since.IsZero() || r.Since.Time.Before(since) {
				since = r.Since.Time
			}
		}
	})
	run(t, w, 25*time.Hour)
	if p.Phase() != rollout.HealthRolledBack && lastRecord(p).Initiator != rollout.InitiatorDeadline {
		t.Fatalf("phase %q, want the owner's rollout rolled back\n%s", p.Phase(), w.Trace())
	}
	if !since.Equal(bumped) {
		t.Errorf("after the rollback the drift is pending since %s, want since the platform bumped the renderer (%s)\n%s", since, bumped, w.Trace())
	}
	if r := lastRecord(p); r.Initiator != rollout.InitiatorDeadline {
		t.Errorf("the drift deadline (24h after the bump) started no rollout by 25h; last record %s\n%s", r.Initiator, w.Trace())
	}
}

// A forced rollout that carried an owner change (apply-pending while the
// owner's change waits, or with it) and failed its canary rolls back to
// the previous revision. Its rollout.after used to stay on the
// MachineDeployment (a forced rollout was never undone), so Cluster API
// took the previous revision's MachineSet for an old one and replaced
// every machine the pool ran, for a request no canary had passed. The
// rollback returns the MachineDeployment to the previous revision as it
// was: only the failed rollout's machines are replaced, and the request
// it carried is a rollout of its own again, canary first.
func TestScenarioARollbackOfAForcedRolloutReplacesOnlyItsOwnMachines(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
	}})
	old := map[string]bool{}
	for _, m := range p.Machines {
		old[m.Name] = true
	}
	badConfig(w, "c2", 5*time.Minute)
	w.After(time.Minute, "platform bumps the proxy defaults to p2", func(*World) { p.Inputs.Platform[CompProxyDefaults] = "p2" })
	w.After(2*time.Minute, "owner edits the config to c2 (bad after 5m); person runs apply-pending", func(*World) {
		p.Inputs.Config = "c2"
		ApplyPending(p, "")
	})
	var replacedDuringRollback []string
	w.Done = func(w *World) bool {
		// While the rollback is the pool's rollout, which machines of the
		// revision it returns to are gone.
		r := lastRecord(p)
		rollingBack := r.Initiator == rollout.InitiatorRollback && r.Outcome == OutcomeInProgress
		for _, name := range sortedKeys(old) {
			if !slices.ContainsFunc(p.Machines, func(m *Machine) bool { return m.Name == name }) {
				if rollingBack {
					replacedDuringRollback = append(replacedDuringRollback, name)
				}
				delete(old, name)
			}
		}
		return false
	}
	run(t, w, 3*time.Hour)
	if len(replacedDuringRollback) > 0 {
		t.Errorf("the rollback replaced machines %v of the revision it returned to\n%s", replacedDuringRollback, w.Trace())
	}
	// The person's apply-pending, which the failed rollout carried, is a
	// rollout of its own once the rollback is done, and the rollback is on
	// record as complete.
	wantRecord(t, w, p, rollout.InitiatorPlatform, history.OutcomeComplete)
	if r := p.History[len(p.History)-2]; r.Initiator != rollout.InitiatorRollback || r.Outcome != history.OutcomeComplete {
		t.Errorf("the record before the forced rollout is %s/%s, want the rollback, Complete\n%s", r.Initiator, r.Outcome, w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the configuration that failed (c2)\n%s", on, w.Trace())
	}
}

// Under managementUpdates: Rollout, an owner's change made with a platform
// bump carries the drift; its canary fails and the pool rolls back. The
// drift is pending again with its age, and the policy applies it, canary
// first, to every machine: those the rollback made too, which booted what
// the old machines ran.
func TestScenarioThePolicyAppliesTheDriftARolledBackRolloutCarried(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	}})
	badConfig(w, "c2", 5*time.Minute)
	w.After(time.Minute, "platform bumps the renderer to r2; owner edits the config to c2 (bad after 5m)", func(*World) {
		p.Inputs.Platform[CompRenderer] = "r2"
		p.Inputs.Config = "c2"
	})
	run(t, w, 4*time.Hour)
	if len(p.Obj.Status.PendingManagementChanges) > 0 {
		t.Errorf("drift still pending: %+v\n%s", p.Obj.Status.PendingManagementChanges, w.Trace())
	}
	for _, m := range p.Machines {
		if !slices.Contains(Values(p.Payloads[m.Payload]), "renderer=r2") || !slices.Contains(Values(p.Payloads[m.Payload]), "user-configs=c1") {
			t.Errorf("machine %s runs %v, want c1 on renderer r2\n%s", m.Name, Values(p.Payloads[m.Payload]), w.Trace())
		}
	}
	if !strings.Contains(w.Trace(), "(rollback, payload") {
		t.Errorf("the pool never rolled back\n%s", w.Trace())
	}
}

// Seed 1348: while the pool rolls back, a machine of the failed rollout's
// MachineSet is deleted (a MachineHealthCheck repair, a person) before
// Cluster API has scaled that MachineSet down. The MachineSet makes its
// replacement through the failed rollout's token, which served the
// payload that failed. While the pool rolls back, that token serves what
// the rollback boots.
func TestScenarioAMachineTheFailedRolloutsSetMakesDuringARollbackBootsTheRollbacksPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 10*time.Minute, 30*time.Minute, nodepoolv1.FailurePolicyRollback)
	}})
	badConfig(w, "c2", 20*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 20m, after the canary's soak)", func(*World) { p.Inputs.Config = "c2" })
	deleted := ""
	w.Done = func(w *World) bool {
		if r := lastRecord(p); deleted != "" || r.Initiator != rollout.InitiatorRollback || r.Outcome != OutcomeInProgress {
			return false
		}
		if on := bootedConfig(p, "c2"); len(on) > 0 {
			deleted = on[0]
			w.After(0, "a person deletes "+deleted+", of the failed rollout", func(*World) { p.DeleteMachine(deleted) })
		}
		return false
	}
	run(t, w, 4*time.Hour)
	if deleted == "" {
		t.Fatalf("no machine of the failed rollout was left while the pool rolled back\n%s", w.Trace())
	}
	if on := bootedConfig(p, "c2"); len(on) > 0 {
		t.Errorf("machines %v boot the configuration that failed (c2)\n%s", on, w.Trace())
	}
}

// Seed 6855: a configuration applied again while the rollout that left it
// still drains is a rollout of its own once the platform changed
// meanwhile. Its token serves the latest payload, which none of the pool's
// machines ran, so the machines it makes are on trial although the oldest
// MachineSet is the configuration's own; and a scale-up while no machine
// is left beside the trial grows on the canary first, never on a payload
// no canary passed.
func TestScenarioAConfigurationAppliedAgainAfterAPlatformChangeGrowsOnItsCanary(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		drainPolicy(nodepoolv1.DrainWait, time.Hour)(np)
	}})
	applyAgainAfterAPlatformChange(w, p)
	w.After(4*time.Hour, "owner scales to 5", func(*World) { p.Obj.Spec.Replicas = ptrInt(5) })
	w.After(6*time.Hour, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, 12*time.Hour) // NoMoreThanCanaryOnAnUntestedPayload
	if got := onPayloads(p)[latestHash(p)]; got != 5 {
		t.Errorf("%d of 5 machines on c1 with r2 once its canary passed\n%s", got, w.Trace())
	}
}

// Seed 8910: a person who resumes a drain halt resumes the rollout on its
// record, which stays the rollout it is. A configuration applied again
// while the old machines' drains were blocked is on trial from its start;
// resuming its drain halt as the budget allows evictions again must not
// make the engine forget that for a look, or Cluster API replaces the
// drained machines beyond the canary at once, on a payload no canary
// passed.
func TestScenarioResumingTheDrainHaltOfAConfigurationAppliedAgainKeepsItsCanary(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 4, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
		np.Spec.Management.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		drainPolicy(nodepoolv1.DrainHalt, time.Hour)(np)
	}})
	applyAgainAfterAPlatformChange(w, p)
	w.After(5*time.Hour, "the budget allows evictions again; a person resumes", func(*World) {
		p.UnblockDrains()
		p.Resumed()
	})
	run(t, w, 12*time.Hour) // NoMoreThanCanaryOnAnUntestedPayload
	if len(p.Machines) != 4 || p.MD.Replicas != 4 {
		t.Errorf("%d machines, MachineDeployment %d, want 4\n%s", len(p.Machines), p.MD.Replicas, w.Trace())
	}
}

// applyAgainAfterAPlatformChange scripts what seeds 6855 and 8910 share:
// the owner changes the config to c2 while a PodDisruptionBudget blocks
// every drain, the platform bumps the renderer to r2, and the owner
// applies c1 again while the old machines still drain (at +3h).
func applyAgainAfterAPlatformChange(w *World, p *Pool) {
	w.After(time.Minute, "a PodDisruptionBudget allows no eviction; owner edits the config to c2", func(*World) {
		p.DrainBlocked = true
		p.Inputs.Config = "c2"
	})
	w.After(2*time.Hour, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(3*time.Hour, "owner edits the config back to c1", func(*World) { p.Inputs.Config = "c1" })
}

// Seed 8994942 again: a configuration applied again after a platform
// change fails its canary on the latest platform and halts. The halt
// points the token at the payload the nodes ran, and it stays there while
// the halt holds: the last healthy payload is what the nodes run besides
// the one the halt recorded as failed, not besides what the token serves
// now, which after the first look is the last healthy one (the token
// flipped between the two at every look, and a machine made at the
// wrong one booted the payload that failed).
func TestScenarioAHaltedConfigurationAppliedAgainKeepsItsTokenOnTheLastHealthyPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		drainPolicy(nodepoolv1.DrainWait, time.Hour)(np)
	}})
	w.Bad["renderer=r2"] = 10 * time.Minute
	applyAgainAfterAPlatformChange(w, p)
	w.After(6*time.Hour, "the budget allows evictions again", func(*World) { p.UnblockDrains() })
	run(t, w, 12*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("phase %q, want the canary on r2 halted\n%s", p.Phase(), w.Trace())
	}
	var onR2 []string
	for _, m := range p.Machines {
		if pl := p.Payloads[m.Payload]; pl != nil && slices.Contains(Values(pl), "renderer=r2") {
			onR2 = append(onR2, m.Name)
		}
	}
	if len(onR2) > 1 {
		t.Errorf("machines %v run r2, which failed its canary; want the canary at most\n%s", onR2, w.Trace())
	}
}
