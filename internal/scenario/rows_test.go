package scenario

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// One scenario per row of docs/rollouts.md the engine handles.

func lastRecord(p *Pool) Record { return p.History[len(p.History)-1] }

func wantRecord(t *testing.T, w *World, p *Pool, initiator rollout.Initiator, outcome string) {
	t.Helper()
	if r := lastRecord(p); r.Initiator != initiator || r.Outcome != outcome {
		t.Errorf("last record %d is %s/%s, want %s/%s\n%s", r.Revision, r.Initiator, r.Outcome, initiator, outcome, w.Trace())
	}
}

func wantAllOn(t *testing.T, w *World, p *Pool, hash string) {
	t.Helper()
	if got := onPayloads(p)[hash]; got != len(p.Machines) || got == 0 {
		t.Errorf("%d of %d machines on %s\n%s", got, len(p.Machines), Short(hash), w.Trace())
	}
}

func TestScenarioAVersionChange(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	w.After(time.Minute, "owner bumps the version to v1.36.4", func(*World) { p.Inputs.Version = "v1.36.4"; p.Obj.Spec.Release.Version = "v1.36.4" })
	run(t, w, time.Hour)
	wantRecord(t, w, p, rollout.InitiatorVersion, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	golden(t, w)
}

func TestScenarioASpecChangeSupersedesTheRolloutInProgress(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(5*time.Minute, "owner edits the config to c3 mid-rollout", func(*World) { p.Inputs.Config = "c3" })
	run(t, w, time.Hour)
	if p.History[1].Outcome != OutcomeSuperseded {
		t.Errorf("revision 2 is %s, want Superseded", p.History[1].Outcome)
	}
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	golden(t, w)
}

func TestScenarioAPauseHoldsAnOwnerChangeUntilItEnds(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	old := latestHash(p)
	w.After(time.Minute, "owner pauses the pool for 2h", func(w *World) {
		p.Obj.Spec.Management.PausedUntil = w.Now.Add(2 * time.Hour).Format(time.RFC3339)
	})
	w.After(2*time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, time.Hour)
	wantAllOn(t, w, p, old)
	run(t, w, 2*time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	golden(t, w)
}

func driftScenario(t *testing.T, policy nodepoolv1.ManagementUpdatePolicy) (*World, *Pool, string) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) { np.Spec.Management.ManagementUpdates = policy }})
	old := latestHash(p)
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(30*time.Minute, "owner scales to 4", func(*World) { p.Obj.Spec.Replicas = ptrInt(4) })
	run(t, w, 2*time.Hour)
	return w, p, old
}

func ptrInt(n int32) *int32 { return &n }

func TestScenarioDriftUnderOnNextRolloutPinsNewNodes(t *testing.T) {
	w, p, old := driftScenario(t, nodepoolv1.ManagementUpdatesOnNextRollout)
	wantAllOn(t, w, p, old)
	if len(p.Obj.Status.PendingManagementChanges) != 1 || p.Obj.Status.PendingManagementChanges[0].Component != "renderer" {
		t.Errorf("pending = %+v, want renderer", p.Obj.Status.PendingManagementChanges)
	}
	golden(t, w)
}

func TestScenarioDriftUnderNewNodesReachesNewMachinesOnly(t *testing.T) {
	w, p, old := driftScenario(t, nodepoolv1.ManagementUpdatesNewNodes)
	if got := onPayloads(p); got[old] != 3 || got[latestHash(p)] != 1 {
		t.Errorf("machines by payload %v, want 3 old and the new one on the latest\n%s", got, w.Trace())
	}
	golden(t, w)
}

func TestScenarioDriftUnderRolloutRollsThePool(t *testing.T) {
	w, p, _ := driftScenario(t, nodepoolv1.ManagementUpdatesRollout)
	wantAllOn(t, w, p, latestHash(p))
	wantRecord(t, w, p, rollout.InitiatorPolicy, OutcomeComplete)
	golden(t, w)
}

func TestScenarioARestartViaRolloutAfter(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	w.After(time.Minute, "owner sets rolloutAfter to now", func(w *World) {
		p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now}
	})
	run(t, w, time.Hour)
	wantRecord(t, w, p, rollout.InitiatorRestart, OutcomeComplete)
	for _, m := range p.Machines {
		if m.Created.Before(t0.Add(31 * time.Minute)) {
			t.Errorf("machine %s from before the restart is left", m.Name)
		}
	}
	golden(t, w)
}

func TestScenarioApplyPendingRollsTheDrift(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(10*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	run(t, w, time.Hour)
	wantRecord(t, w, p, rollout.InitiatorPlatform, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Obj.Status.PendingManagementChanges) != 0 {
		t.Errorf("drift left: %+v", p.Obj.Status.PendingManagementChanges)
	}
	golden(t, w)
}

// nightly is a window every night 02:00–04:00 in Europe/Berlin.
func nightly(np *nodepoolv1.NodePool) {
	np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
		{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "Europe/Berlin"}}}
}

func TestScenarioAWindowHoldsAPlatformRollout(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: nightly})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	run(t, w, 6*time.Hour)
	if len(p.History) != 1 {
		t.Errorf("a rollout started outside the window: %+v", lastRecord(p))
	}
	run(t, w, 12*time.Hour)
	r := lastRecord(p)
	if r.Initiator != rollout.InitiatorPlatform || r.Started.UTC().Hour() != 1 {
		t.Errorf("last record %+v, want the platform rollout at the window's opening (01:00Z)", r)
	}
	golden(t, w)
}

func TestScenarioAnExclusionHoldsAnOwnerChange(t *testing.T) {
	w := New(t0)
	start := t0.Add(45 * time.Minute)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Exclusions: []nodepoolv1.MaintenanceExclusion{
			{Name: "freeze", Start: metav1.Time{Time: start}, End: metav1.Time{Time: start.Add(4 * time.Hour)}, Scope: nodepoolv1.ExclusionScopeAll}}}
	}})
	w.After(30*time.Minute, "owner edits the config to c2 during the freeze", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 2*time.Hour)
	if len(p.History) != 1 {
		t.Errorf("a rollout started inside the exclusion: %+v", lastRecord(p))
	}
	run(t, w, 4*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	if r := lastRecord(p); r.Started.Before(start.Add(4 * time.Hour)) {
		t.Errorf("started %s, before the exclusion ended", r.Started)
	}
	golden(t, w)
}

func TestScenarioTheDriftDeadlineAppliesDriftAtTheNextWindow(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		nightly(np)
		np.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 24 * time.Hour}
	}})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	run(t, w, 3*24*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorDeadline, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	golden(t, w)
}

func TestScenarioACanaryPasses(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 5*time.Minute, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if d := lastRecord(p).Completed.Sub(lastRecord(p).Started); d < 30*time.Minute {
		t.Errorf("the rollout took %s, less than the canary soak", d)
	}
	golden(t, w)
}

func badConfig(w *World, config string, after time.Duration) { w.Bad["user-configs="+config] = after }

func TestScenarioAFailedCanaryHaltsTheRollout(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
	}})
	old := latestHash(p)
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 2*time.Hour)
	if p.Phase() != rollout.HealthHalted {
		t.Errorf("phase %q, want Halted\n%s", p.Phase(), w.Trace())
	}
	if got := onPayloads(p)[old]; got != 3 {
		t.Errorf("%d machines left on the old payload, want 3", got)
	}
	golden(t, w)
}

func TestScenarioAFailedCanaryRollsBack(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyRollback)
	}})
	old := latestHash(p)
	badConfig(w, "c2", 10*time.Minute)
	w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 2*time.Hour)
	if p.Phase() != rollout.HealthRolledBack {
		t.Errorf("phase %q, want RolledBack\n%s", p.Phase(), w.Trace())
	}
	wantAllOn(t, w, p, old)
	wantRecord(t, w, p, rollout.InitiatorRollback, OutcomeComplete)
	golden(t, w)
}

func inPlace(np *nodepoolv1.NodePool) { np.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace }

func TestScenarioAnInPlaceRollout(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: inPlace})
	names := map[string]bool{}
	for _, m := range p.Machines {
		names[m.Name] = true
	}
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	for _, m := range p.Machines {
		if !names[m.Name] {
			t.Errorf("machine %s is new: an InPlace rollout replaces none", m.Name)
		}
	}
	golden(t, w)
}

func TestScenarioAnInPlaceRolloutWithHealth(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		inPlace(np)
		np.Spec.Management.Health = health(1, 30*time.Minute, 5*time.Minute, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, 3*time.Hour)
	wantAllOn(t, w, p, latestHash(p))
	golden(t, w)
}

// A controller restart mid-canary: the next reconcile decides from the
// objects only and carries on where the last one left off.
func TestScenarioAControllerRestartMidCanaryCarriesOn(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 5*time.Minute, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(20*time.Minute, "controller restarts", func(w *World) { w.Restart() })
	run(t, w, 3*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.History) != 2 {
		t.Errorf("%d records, want 2: a restart records no new rollout", len(p.History))
	}
	golden(t, w)
}

// A rollout of 49 minutes (a 30-minute canary soak, then a 5-minute soak
// a machine) is looked at every 5 s while young, then every twentieth of
// its age, at most every minute: what moves it raises events and its
// soaks end when due, so it completes when it did with the 5 s poll (its
// soaks' ends are looked at a second after they are due) with a fraction
// of the looks. The 5 s poll looked at it some 590 times.
func TestScenarioALongRolloutIsLookedAtLessOften(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 30*time.Minute, 5*time.Minute, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	run(t, w, time.Minute)
	before := p.looks
	run(t, w, 3*time.Hour) // ARolloutInProgressIsLookedAtAgain
	wantRecord(t, w, p, rollout.InitiatorSpec, OutcomeComplete)
	r := lastRecord(p)
	took := r.Completed.Sub(r.Started)
	if took < 49*time.Minute || took > 49*time.Minute+2*time.Second {
		t.Errorf("the rollout took %s, want the 49 minutes its soaks and boots take", took)
	}
	t.Logf("%d looks in %s", p.looks-before, took)
	if looks := p.looks - before; looks > int(took/(5*time.Second))/5 {
		t.Errorf("the pool was looked at %d times in a %s rollout, want at most a fifth of a look every 5 s (%d)", looks, took, int(took/(5*time.Second))/5)
	}
}
