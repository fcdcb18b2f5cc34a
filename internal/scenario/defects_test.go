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

// The defects found where gates meet (each failed on the engine before its
// fix): each scenario says the correct behaviour.

// 1. A forced InPlace rollout is health-gated: the next node waits for the
// one updated to soak.
func TestScenarioAForcedInPlaceRolloutIsHealthGated(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		inPlace(np)
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "platform bumps the renderer to r2; owner sets rolloutAfter", func(w *World) {
		p.Inputs.Platform[CompRenderer] = "r2"
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now}
	})
	run(t, w, 20*time.Minute)
	updated := 0
	for _, m := range p.Machines {
		if m.Payload == latestHash(p) || m.Phase != "" {
			updated++
		}
	}
	if updated > 1 {
		t.Errorf("%d nodes updated or updating within 20 minutes; the canary soaks 30m\n%s", updated, w.Trace())
	}
}

// 2. The canary holds the rest of its round: no machine beyond the canary
// is made on an untested payload, whatever maxSurge is.
func TestScenarioTheCanaryHoldsTheRestOfItsRound(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 10, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(3))
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour) // NoMoreThanCanaryOnAnUntestedPayload is checked at every step
}

// 3. A halt outlives the failed machine: deleting it does not resume the
// rollout.
func TestScenarioAHaltOutlivesTheFailedMachine(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(time.Hour, "a person deletes the failed machine", func(*World) {
		for _, m := range p.Machines {
			if m.Gate != nil && m.Gate.Reason == nodepoolv1.GateReasonFailed {
				p.DeleteMachine(m.Name)
				return
			}
		}
	})
	run(t, w, 3*time.Hour)
	if p.Phase() != rollout.HealthHalted {
		t.Errorf("phase %q after the failed machine went, want Halted\n%s", p.Phase(), w.Trace())
	}
}

// Found by random seed 9: a person's apply-pending on a halted pool does
// not roll the payload that failed onto every machine. The halt holds the
// forced rollout (the decision says so) until a person resumes the pool or
// the owner changes it; then it goes on.
func TestScenarioAHaltHoldsAForcedRequestUntilAResume(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	w.After(time.Hour, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	var held rollout.Decision
	w.After(90*time.Minute, "look at the decision", func(*World) { held = p.LastPlan().Decision })
	run(t, w, 2*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
	if p.Phase() != rollout.HealthHalted {
		t.Errorf("phase %q, want Halted\n%s", p.Phase(), w.Trace())
	}
	if held.Action != rollout.ActionHold || held.Forced == nil || held.Forced.State != rollout.ForcedHalted || !strings.Contains(held.Reason, "resume") {
		t.Errorf("decision %+v while halted, want the forced rollout held by the halt, saying how to resume\n%s", held, w.Trace())
	}
}

// 4. A halted forced rollout boots the last healthy payload on its new
// machines (scale-ups, repairs).
func TestScenarioAHaltedForcedRolloutBootsTheLastHealthyPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
	}})
	w.Bad["renderer=r2"] = 10 * time.Minute
	w.After(time.Minute, "platform bumps the renderer to r2 (bad after 10m)", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	w.After(time.Hour, "owner scales to 5", func(*World) { p.Obj.Spec.Replicas = ptrInt(5) })
	run(t, w, 3*time.Hour) // AHaltedPoolBootsTheLastHealthyPayload
}

// fleetAtTheWindowsEnd is a pool with a nightly window (01:00–03:00Z in
// winter) and pending drift, and a fleet rollout of the drift that
// triggers it in the window's last second: the trigger's time (the next
// whole second) is outside the window, so the pool holds it until the
// next night.
func fleetAtTheWindowsEnd(t *testing.T, edit func(*nodepoolv1.NodePool)) (*World, *Pool) {
	w := New(t0)
	a := settleNew(t, w, PoolSpec{Name: "a", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		if edit != nil {
			edit(np)
		}
	}})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { a.Inputs.Platform[CompRenderer] = "r2" })
	w.At(time.Date(2026, 12, 1, 2, 59, 59, 0, time.UTC), "fleet rollout of the drift, in the window's last second", func(w *World) {
		w.AddFleet("bump", nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending, Waves: []intstr.IntOrString{intstr.FromString("100%")},
			HeldPools: nodepoolv1.HeldPoolWait}, "a")
	})
	return w, a
}

// 5. A fleet wave completes when its pool carried out the trigger under
// another request (here the pool's drift deadline, whose request is the
// next window's opening, newer than the trigger).
func TestScenarioAFleetWaveCompletesWhenAnotherRequestCarriedOutItsTrigger(t *testing.T) {
	w, a := fleetAtTheWindowsEnd(t, func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 24 * time.Hour}
	})
	run(t, w, 3*24*time.Hour) // FleetWavesComplete
	if f := w.Fleets()[0]; f.Status.Phase != nodepoolv1.FleetPhaseComplete {
		t.Errorf("fleet %s, want Complete\n%s", f.State(), w.Trace())
	}
	if len(a.Obj.Status.PendingManagementChanges) != 0 {
		t.Errorf("drift left: %+v", a.Obj.Status.PendingManagementChanges)
	}
}

// Found by random seed 6: the fleet triggers a pool its window holds, and
// before the window opens the owner changes the pool. That rollout replaces
// every machine on the latest payload, drift included: the fleet's pool is
// done, and its wave completes.
func TestScenarioAnOwnerChangeAfterTheTriggerCarriesItOut(t *testing.T) {
	w, a := fleetAtTheWindowsEnd(t, nil)
	w.At(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), "owner of a edits the config to c2", func(*World) { a.Inputs.Config = "c2" })
	run(t, w, 2*24*time.Hour) // FleetWavesComplete
	if f := w.Fleets()[0]; f.Status.Phase != nodepoolv1.FleetPhaseComplete {
		t.Errorf("fleet %s, want Complete\n%s", f.State(), w.Trace())
	}
	if r := lastRecord(a); r.Initiator != "spec" {
		t.Errorf("last record %+v, want the owner's rollout (no second, forced one)\n%s", r, w.Trace())
	}
}

// 6. A person's later apply-pending (an emergency) wins over the fleet's
// older, held trigger.
func TestScenarioAPersonsLaterApplyPendingWinsOverTheFleet(t *testing.T) {
	w, a := fleetAtTheWindowsEnd(t, nil)
	w.At(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "person runs apply-pending --outside-windows --reason hotfix", func(*World) { ApplyPending(a, "hotfix") })
	run(t, w, 2*24*time.Hour) // APersonsLaterRequestWins
	if r := lastRecord(a); !strings.HasPrefix(r.Reason, "outside maintenance windows") || r.Started.After(time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)) {
		t.Errorf("last record %+v, want the person's emergency rollout at 10:00\n%s", r, w.Trace())
	}
}

// 7. The drift deadline counts from when the nodes first differed, not
// from the component's latest value.
func TestScenarioTheDriftDeadlineCountsFromTheFirstDifference(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 48 * time.Hour}
	}})
	for i, v := range []string{"r2", "r3", "r4", "r5", "r6"} {
		v := v
		w.After(time.Duration(i)*24*time.Hour+time.Minute, "platform bumps the renderer to "+v, func(*World) { p.Inputs.Platform[CompRenderer] = v })
	}
	run(t, w, 6*24*time.Hour)
	if r := lastRecord(p); r.Initiator != rollout.InitiatorDeadline {
		t.Errorf("no deadline rollout in 6 days of daily bumps with a 48h deadline\n%s", w.Trace())
	}
}

// 9. On the fall-back night a sub-hourly window does not disappear.
func TestScenarioASubHourlyWindowSurvivesTheFallBackNight(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York"} {
		t.Run(zone, func(t *testing.T) {
			start := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
			if zone == "America/New_York" {
				start = time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)
			}
			w := New(start)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
				np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
					{Schedule: "*/10 * * * *", Duration: metav1.Duration{Duration: 5 * time.Minute}, TimeZone: zone}}}
			}})
			w.At(start.Add(80*time.Minute), "platform bumps the renderer; person runs apply-pending", func(*World) {
				p.Inputs.Platform[CompRenderer] = "r2"
				ApplyPending(p, "")
			})
			run(t, w, 3*time.Hour)
			if p.Obj.Status.Maintenance == nil || p.Obj.Status.Maintenance.NextWindow == nil {
				t.Errorf("no nextWindow on the fall-back night\n%s", w.Trace())
			}
			if r := lastRecord(p); r.Initiator != rollout.InitiatorPlatform {
				t.Errorf("the apply-pending never started\n%s", w.Trace())
			}
		})
	}
}

// 10. A window's start stays put while the same (merged) window is open.
func TestScenarioAWindowsStartStaysPutWhileItIsOpen(t *testing.T) {
	w := New(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
			{Schedule: "0 8 * * *", Duration: metav1.Duration{Duration: time.Hour}},
			{Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}}}}
	}})
	var starts []time.Time
	for _, at := range []time.Duration{90 * time.Minute, 150 * time.Minute} {
		w.At(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC).Add(at), "look at nextWindow", func(w *World) {
			w.Restart()
		})
	}
	w.At(time.Date(2026, 12, 1, 8, 30, 1, 0, time.UTC), "read", func(*World) { starts = append(starts, p.Obj.Status.Maintenance.NextWindow.Start.Time) })
	w.At(time.Date(2026, 12, 1, 9, 30, 1, 0, time.UTC), "read", func(*World) { starts = append(starts, p.Obj.Status.Maintenance.NextWindow.Start.Time) })
	run(t, w, 4*time.Hour)
	if len(starts) != 2 || !starts[0].Equal(starts[1]) {
		t.Errorf("nextWindow.start at 08:30 and 09:30: %v, want the same merged start", starts)
	}
}

// 11. AllMachinesReady agrees with a machine that soaks: it is not Ready
// to Cluster API, and the message says which machine soaks.
func TestScenarioAllMachinesReadySaysWhichMachineSoaks(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 15*time.Minute) // the canary soaks now
	c := p.Condition(nodepoolv1.ConditionAllMachinesReady)
	if c == nil || !strings.Contains(c.Message, "soak") {
		t.Errorf("AllMachinesReady = %+v while a machine soaks, want it to say which machine soaks\n%s", c, w.Trace())
	}
}
