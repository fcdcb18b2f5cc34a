package scenario

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// The combinations of gates that the real stack used to cover one test
// each (a fleet rollout with health gates, with a controller restart, a
// drift deadline with an exclusion): in simulated time they run in
// milliseconds, and the invariants are checked at every step. The real
// stack keeps one test per capability.

// fleetOf settles n health-gated pools p0..p(n-1) with pending renderer
// drift (bad for the pools in bad) and starts a fleet rollout over them.
func fleetOf(t *testing.T, w *World, n int, bad map[int]bool, spec nodepoolv1.FleetRolloutSpec) ([]*Pool, *Fleet) {
	t.Helper()
	var pools []*Pool
	var names []string
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		pools = append(pools, w.AddPool(PoolSpec{Name: name, Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Health = health(1, 10*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		}}))
		names = append(names, name)
	}
	run(t, w, 30*time.Minute)
	w.Bad["renderer=r2-bad"] = 5 * time.Minute
	w.After(time.Minute, "platform bumps the renderer to r2 (r2-bad on some pools)", func(*World) {
		for i, p := range pools {
			v := "r2"
			if bad[i] {
				v = "r2-bad"
			}
			p.Inputs.Platform[CompRenderer] = v
		}
	})
	run(t, w, 5*time.Minute)
	return pools, w.AddFleet("bump", spec, names...)
}

func fleetRecordsOf(p *Pool, name string) []Record {
	var out []Record
	for _, r := range p.History {
		if string(r.Initiator) == nodepoolv1.FleetRolloutInitiator(name) {
			out = append(out, r)
		}
	}
	return out
}

// A fleet rollout halts when a pool of its second wave fails its health
// gate, touches no pool of the third wave while halted, and goes on to the
// end once the owner fixed the pool and a person resumed the rollout.
func TestScenarioAFleetRolloutHaltsOnAFailedWave2PoolAndGoesOnAfterTheFixAndAResume(t *testing.T) {
	w := New(t0)
	pools, f := fleetOf(t, w, 6, map[int]bool{1: true}, nodepoolv1.FleetRolloutSpec{
		Action: nodepoolv1.FleetActionApplyPending,
		Waves:  []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(3), intstr.FromString("100%")},
		Soak:   &metav1.Duration{Duration: 10 * time.Minute},
	})
	run(t, w, 3*time.Hour)
	if f.Status.Phase != nodepoolv1.FleetPhaseHalted {
		t.Fatalf("%s, want Halted on the failed pool p1\n%s", f.State(), w.Trace())
	}
	if pools[1].Phase() != rollout.HealthHalted {
		t.Errorf("p1's health phase %q, want Halted", pools[1].Phase())
	}
	for _, p := range pools[3:] {
		if n := len(fleetRecordsOf(p, "bump")); n != 0 || p.Annotation(nodepoolv1.AnnotationApplyPending) != "" {
			t.Errorf("pool %s of wave 3 was touched while the rollout was halted (%d records)\n%s", p.Name, n, w.Trace())
		}
	}
	w.After(time.Minute, "owner of p1 fixes it (config c2)", func(*World) { pools[1].Inputs.Config = "c2"; pools[1].Inputs.Platform[CompRenderer] = "r2" })
	w.After(time.Hour, "person resumes the fleet rollout", func(w *World) {
		f.Spec.ResumedAt = &metav1.Time{Time: w.Now}
		f.watch = true
	})
	run(t, w, 12*time.Hour)
	if f.Status.Phase != nodepoolv1.FleetPhaseComplete || f.Status.HaltedAt != nil {
		t.Fatalf("%s, want Complete after the resume\n%s", f.State(), w.Trace())
	}
	for i, p := range pools {
		if i == 1 {
			continue
		}
		if recs := fleetRecordsOf(p, "bump"); len(recs) != 1 || recs[0].Outcome != OutcomeComplete {
			t.Errorf("pool %s: fleet records %+v, want exactly one, complete", p.Name, recs)
		}
		if len(p.Obj.Status.PendingManagementChanges) != 0 {
			t.Errorf("pool %s: drift left %+v", p.Name, p.Obj.Status.PendingManagementChanges)
		}
	}
}

// A controller restarted in the middle of a fleet rollout goes on from
// what the pools and the FleetRollout keep: no pool is rolled twice.
func TestScenarioARestartedControllerResumesAFleetRolloutWithoutRollingAPoolTwice(t *testing.T) {
	w := New(t0)
	pools, f := fleetOf(t, w, 4, nil, nodepoolv1.FleetRolloutSpec{
		Action: nodepoolv1.FleetActionApplyPending,
		Waves:  []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
		Soak:   &metav1.Duration{Duration: 5 * time.Minute},
	})
	for _, d := range []time.Duration{3 * time.Minute, 20 * time.Minute, 40 * time.Minute, 47 * time.Minute} {
		w.After(d, "the controller restarts", func(w *World) { w.Restart() })
	}
	run(t, w, 6*time.Hour)
	if f.Status.Phase != nodepoolv1.FleetPhaseComplete {
		t.Fatalf("%s, want Complete\n%s", f.State(), w.Trace())
	}
	for _, p := range pools {
		if recs := fleetRecordsOf(p, "bump"); len(recs) != 1 || recs[0].Outcome != OutcomeComplete {
			t.Errorf("pool %s: fleet records %+v, want exactly one, complete\n%s", p.Name, recs, w.Trace())
		}
	}
}

// An exclusion over the drift deadline and the next window holds the
// deadline's rollout until the first window after the exclusion ends.
func TestScenarioAnExclusionHoldsTheDriftDeadlineUntilTheFirstWindowAfterIt(t *testing.T) {
	w := New(t0)
	// Windows 01:00–03:00Z nightly; the deadline passes on Dec 1 at 12:01Z;
	// the freeze covers the nights of Dec 2 and Dec 3.
	freeze := nodepoolv1.MaintenanceExclusion{Name: "freeze", Scope: nodepoolv1.ExclusionScopeAll,
		Start: metav1.Time{Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)}, End: metav1.Time{Time: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}}
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 24 * time.Hour}
		np.Spec.Management.Maintenance.Exclusions = []nodepoolv1.MaintenanceExclusion{freeze}
	}})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	run(t, w, 5*24*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorDeadline, OutcomeComplete)
	if r := lastRecord(p); len(p.History) != 2 || r.ForcedAt == nil || !r.ForcedAt.Equal(time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)) {
		t.Errorf("the deadline's rollout %+v, want one, at the first window after the exclusion (2026-12-04T01:00Z)\n%s", r, w.Trace())
	}
	wantAllOn(t, w, p, latestHash(p))
}
