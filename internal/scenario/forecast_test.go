package scenario

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
)

// forecastOf is what the CLI hands the forecast for a pool of the world
// at now: its object, machines and history, and the change (the pinned
// proxy defaults), its drift's since as the pool's status has it.
func forecastOf(p *Pool) ForecastPool {
	fp := ForecastPool{Pool: p.Obj.DeepCopy(), Machines: int32(len(p.Machines)), Past: p.recentRollouts()}
	since := time.Time{}
	for _, row := range p.Obj.Status.PendingManagementChanges {
		since = row.Since.Time
	}
	fp.Change = []ForecastChange{{Component: inputs.ProxyDefaults, Since: since}}
	return fp
}

// withHistory settles a pool and gives it three owner rollouts whose
// machines boot in boot.
func withHistory(t *testing.T, w *World, s PoolSpec, boot time.Duration) *Pool {
	t.Helper()
	p := settleNew(t, w, s)
	w.BootDelay = boot
	for i := 2; i <= 4; i++ {
		c := fmt.Sprintf("c%d", i)
		w.After(time.Duration(i-1)*time.Hour, "owner edits the config to "+c, func(*World) { p.Inputs.Config = c })
	}
	return p
}

// firstRollout is the first complete rollout of the pool started at or
// after from.
func firstRollout(p *Pool, from time.Time) *Record {
	for i := range p.History {
		r := &p.History[i]
		if !r.Started.Before(from) && r.Outcome == OutcomeComplete {
			return r
		}
	}
	return nil
}

// The forecast of a platform change over pools with different policies,
// windows in several time zones, an exclusion, a drift deadline and a
// pause says when each pool's rollout starts and ends; the simulated
// fleet then does it: every rollout starts within 2 minutes of the
// forecast, and ends within the predicted spread (fastest–slowest time
// per round of the pool's history) widened by 5 minutes. The pools that
// never run it (NewNodes, OnNextRollout without a deadline) do not.
func TestTheForecastOfAPlatformChangeIsWhatTheFleetThenDoes(t *testing.T) {
	w := New(t0)
	daily := func(at string, zone string) []nodepoolv1.MaintenanceWindow {
		return []nodepoolv1.MaintenanceWindow{{Schedule: "0 " + at + " * * *", Duration: metav1.Duration{Duration: 3 * time.Hour}, TimeZone: zone}}
	}
	spec := func(name string, policy nodepoolv1.ManagementUpdatePolicy, edit func(*nodepoolv1.NodePool)) PoolSpec {
		return PoolSpec{Name: name, Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.ManagementUpdates = policy
			if edit != nil {
				edit(np)
			}
		}}
	}
	pools := []*Pool{
		withHistory(t, w, spec("now", nodepoolv1.ManagementUpdatesRollout, nil), 4*time.Minute),
		withHistory(t, w, spec("tokyo", nodepoolv1.ManagementUpdatesRollout, func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: daily("2", "Asia/Tokyo")}
			np.Spec.Management.Health = health(1, 10*time.Minute, 2*time.Minute, nodepoolv1.FailurePolicyHalt)
		}), 5*time.Minute),
		withHistory(t, w, spec("excluded", nodepoolv1.ManagementUpdatesRollout, func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: daily("20", "America/New_York"),
				Exclusions: []nodepoolv1.MaintenanceExclusion{{Name: "freeze", Start: metav1.NewTime(t0.Add(8 * time.Hour)), End: metav1.NewTime(t0.Add(36 * time.Hour))}}}
		}), 3*time.Minute),
		withHistory(t, w, spec("deadline", nodepoolv1.ManagementUpdatesOnNextRollout, func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: daily("1", "UTC"), DriftDeadline: &metav1.Duration{Duration: 48 * time.Hour}}
		}), 4*time.Minute),
		withHistory(t, w, spec("paused", nodepoolv1.ManagementUpdatesRollout, nil), 2*time.Minute),
		settleNew(t, w, spec("young", nodepoolv1.ManagementUpdatesRollout, nil)),
		withHistory(t, w, spec("newnodes", nodepoolv1.ManagementUpdatesNewNodes, nil), 4*time.Minute),
		withHistory(t, w, spec("onnext", nodepoolv1.ManagementUpdatesOnNextRollout, nil), 4*time.Minute),
		settleNew(t, w, spec("lonely", nodepoolv1.ManagementUpdatesRollout, func(np *nodepoolv1.NodePool) {
			np.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "SimMachineTemplate", APIGroup: "infrastructure.sim.nodepool.dev", Name: "tmpl"}
		})),
	}
	run(t, w, 5*time.Hour)
	w.After(0, "the owner pauses a pool", func(*World) {
		w.Pool("paused").Obj.Spec.Management.PausedUntil = w.Now.Add(20 * time.Hour).Format(time.RFC3339)
	})
	run(t, w, time.Minute)
	now := w.Now
	var in ForecastInput
	in.Now, in.Horizon = now, 10*24*time.Hour
	for _, p := range pools {
		in.Pools = append(in.Pools, forecastOf(p))
	}
	fc := RunForecast(in)
	w.After(0, "the platform changes the proxy defaults", func(*World) {
		for _, p := range pools {
			p.Inputs.Platform[CompProxyDefaults] = "p2"
		}
	})
	run(t, w, in.Horizon)
	for i, p := range pools {
		f := fc.Pools[i]
		got := firstRollout(p, now)
		t.Logf("%s: %s start %v end %v (%v–%v) holds %v %s; took %v", p.Name, f.When, f.Start, f.End, f.EndLow, f.EndHigh, f.Holds, f.Reason, got)
		if f.End == nil {
			if got != nil {
				t.Errorf("%s: forecast never (%s), the fleet rolled it at %s", p.Name, f.Reason, got.Started)
			}
			continue
		}
		if got == nil {
			t.Errorf("%s: forecast to end at %s, the fleet never rolled it\n%s", p.Name, f.End, w.Trace())
			continue
		}
		if d := got.Started.Sub(*f.Start); d < -2*time.Minute || d > 2*time.Minute {
			t.Errorf("%s: forecast to start at %s, started at %s", p.Name, f.Start, got.Started)
		}
		if f.Prediction.FromSettings {
			// Too short a history: the declared settings, which err long.
			if got.Completed.After(*f.End) {
				t.Errorf("%s: forecast from the declared settings to end by %s, ended at %s", p.Name, f.End, got.Completed)
			}
			continue
		}
		if got.Completed.Before(f.EndLow.Add(-5*time.Minute)) || got.Completed.After(f.EndHigh.Add(5*time.Minute)) {
			t.Errorf("%s: forecast to end %s–%s, ended at %s", p.Name, f.EndLow, f.EndHigh, got.Completed)
		}
	}
	want := map[string]string{"now": WhenNow, "tokyo": WhenWindow, "excluded": WhenWindow, "deadline": WhenDeadline, "paused": WhenPause, "young": WhenNow, "newnodes": WhenNever, "onnext": WhenNever, "lonely": WhenNow}
	for _, f := range fc.Pools {
		if f.When != want[f.Name] {
			t.Errorf("%s: forecast %s, want %s", f.Name, f.When, want[f.Name])
		}
	}
	if !strings.Contains(strings.Join(fc.Pools[2].Holds, ";"), "exclusion freeze") {
		t.Errorf("excluded: holds %v, want the exclusion", fc.Pools[2].Holds)
	}
	if !strings.HasPrefix(strings.Join(fc.Pools[4].Holds, ";"), "paused until") {
		t.Errorf("paused: holds %v, want the pause", fc.Pools[4].Holds)
	}
	// No rollout of its own to go by: the young pool is predicted from
	// the pools like it (the same template, 3 machines), the lonely one,
	// of another template, from the declared settings.
	if young := fc.Pools[5]; young.Prediction.FromSettings || young.Prediction.Peers != 7 || young.Prediction.Short != 0 ||
		!strings.Contains(young.Basis, "7 pools like it (DockerMachineTemplate of infrastructure.cluster.x-k8s.io, Replace, 3 machines)") {
		t.Errorf("young: prediction %+v basis %q, want from the 7 pools like it", young.Prediction, young.Basis)
	}
	if lonely := fc.Pools[8]; !lonely.Prediction.FromSettings || lonely.Prediction.Peers != 0 || lonely.Basis != "" {
		t.Errorf("lonely: prediction %+v basis %q, want from the declared settings (no pool like it)", lonely.Prediction, lonely.Basis)
	}
	if fc.PoolsAt[100] != nil || fc.PoolsAt[50] == nil || len(fc.Never) != 2 {
		t.Errorf("summary %v never %v: want half by a time, never all, two pools never", fc.PoolsAt, fc.Never)
	}
}

// A FleetRollout's forecast says when each wave starts and ends, and the
// fleet rollout then carried out in the model does it within the waves'
// predicted spread.
func TestTheForecastOfAFleetRolloutIsWhatItThenDoes(t *testing.T) {
	w := New(t0)
	var pools []*Pool
	var refs []fleet.Ref
	for i, boot := range []time.Duration{3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 2 * time.Minute} {
		name := fmt.Sprintf("pool-%d", i)
		pools = append(pools, withHistory(t, w, PoolSpec{Name: name, Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
				{Schedule: fmt.Sprintf("0 %d * * *", 18+i), Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}}}
		}}, boot))
		refs = append(refs, fleet.Ref{Namespace: Namespace, Name: name})
	}
	run(t, w, 5*time.Hour)
	w.After(0, "the platform changes the proxy defaults", func(*World) {
		for _, p := range pools {
			p.Inputs.Platform[CompProxyDefaults] = "p2"
		}
	})
	run(t, w, time.Minute) // the drift is pending: the pools wait for the fleet rollout
	spec := nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending, Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
		Soak: &metav1.Duration{Duration: 30 * time.Minute}, HeldPools: nodepoolv1.HeldPoolWait, MaxConcurrent: ptr.To(int32(2))}
	in := ForecastInput{Now: w.Now, Horizon: 5 * 24 * time.Hour, Fleet: &ForecastFleet{Name: "platform", Spec: spec, Pools: refs}}
	for _, p := range pools {
		in.Pools = append(in.Pools, forecastOf(p))
	}
	fc := RunForecast(in)
	f := w.AddFleetRefs("platform", spec, refs)
	run(t, w, in.Horizon)
	if f.Status.Phase != nodepoolv1.FleetPhaseComplete || fc.FleetEnd == nil || len(fc.Waves) != 2 {
		t.Fatalf("fleet %s, forecast end %v waves %+v\n%s", f.State(), fc.FleetEnd, fc.Waves, w.Trace())
	}
	for i, wv := range f.Status.Waves {
		fw := fc.Waves[i]
		t.Logf("wave %d: forecast %v–%v, ran %v–%v", wv.Wave, fw.Start, fw.End, wv.StartedAt, wv.CompletedAt)
		if d := wv.CompletedAt.Sub(*fw.End); d < -15*time.Minute || d > 15*time.Minute {
			t.Errorf("wave %d: forecast to end at %s, ended at %s", wv.Wave, fw.End, wv.CompletedAt)
		}
	}
	if d := f.Status.CompletedAt.Sub(*fc.FleetEnd); d < -15*time.Minute || d > 15*time.Minute {
		t.Errorf("forecast to complete at %s, completed at %s", fc.FleetEnd, f.Status.CompletedAt)
	}
	for _, p := range fc.Pools {
		if p.When != WhenFleet || p.Wave == 0 {
			t.Errorf("%s: %s wave %d, want rolled by the fleet", p.Name, p.When, p.Wave)
		}
	}
}

// A fleet rollout under way is forecast from its status and its pools'
// kept states (what the controller does each time a wave completes): the
// rest of it then ends within 15 minutes of the forecast, which errs long
// by what a pool rolling at the forecast has done.
func TestAFleetRolloutUnderWayIsForecastFromItsStatus(t *testing.T) {
	w := New(t0)
	var pools []*Pool
	var refs []fleet.Ref
	for i, boot := range []time.Duration{3 * time.Minute, 4 * time.Minute, 5 * time.Minute} {
		name := fmt.Sprintf("pool-%d", i)
		pools = append(pools, withHistory(t, w, PoolSpec{Name: name, Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
				{Schedule: fmt.Sprintf("0 %d * * *", 20+i), Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "UTC"}}}
		}}, boot))
		refs = append(refs, fleet.Ref{Namespace: Namespace, Name: name})
	}
	run(t, w, 5*time.Hour)
	w.After(0, "the platform changes the proxy defaults", func(*World) {
		for _, p := range pools {
			p.Inputs.Platform[CompProxyDefaults] = "p2"
		}
	})
	run(t, w, time.Minute)
	spec := nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending, Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
		Soak: &metav1.Duration{Duration: time.Hour}, HeldPools: nodepoolv1.HeldPoolWait}
	f := w.AddFleetRefs("platform", spec, refs)
	// Until wave 1 completed and wave 2 started: a pool of it rolling.
	for f.Status.CurrentWave < 2 || f.Status.Phase != nodepoolv1.FleetPhaseProgressing {
		run(t, w, time.Minute)
	}
	in := ForecastInput{Now: w.Now, Horizon: 5 * 24 * time.Hour}
	members := map[fleet.Ref]nodepoolv1.FleetRolloutPool{}
	for _, m := range f.members() {
		members[fleet.RefOf(m)] = m
	}
	st := f.Status
	in.Fleet = &ForecastFleet{Name: f.Name, Spec: spec, Pools: refs, Status: &st, Members: members}
	for _, p := range pools {
		fp := forecastOf(p)
		fp.Change = ChangesOf(p.Obj.Status.PendingManagementChanges)
		in.Pools = append(in.Pools, fp)
	}
	fc := RunForecast(in)
	run(t, w, in.Horizon)
	if f.Status.Phase != nodepoolv1.FleetPhaseComplete || fc.FleetEnd == nil {
		t.Fatalf("fleet %s, forecast end %v, notes %v\n%s", f.State(), fc.FleetEnd, fc.Notes, w.Trace())
	}
	t.Logf("forecast at %s: end %s; ended %s", in.Now, fc.FleetEnd, f.Status.CompletedAt)
	if d := f.Status.CompletedAt.Sub(*fc.FleetEnd); d < -15*time.Minute || d > 15*time.Minute {
		t.Errorf("forecast to complete at %s, completed at %s", fc.FleetEnd, f.Status.CompletedAt)
	}
	if fc.Pools[0].When != WhenNoChange {
		t.Errorf("the pool of wave 1 is done: %+v", fc.Pools[0])
	}
}

// forecastNow forecasts the proxy-defaults change over the pools at the
// world's now, the CLI's way (forecastOf), over horizon.
func forecastNow(w *World, horizon time.Duration, pools ...*Pool) Forecast {
	in := ForecastInput{Now: w.Now, Horizon: horizon}
	for _, p := range pools {
		in.Pools = append(in.Pools, forecastOf(p))
	}
	return RunForecast(in)
}

// changeProxyDefaults is the platform change a forecast is made of, as it
// then happens in the world.
func changeProxyDefaults(w *World, pools ...*Pool) {
	w.After(0, "the platform changes the proxy defaults", func(*World) {
		for _, p := range pools {
			p.Inputs.Platform[CompProxyDefaults] = "p2"
		}
	})
}

// A forecast reads a halt from where the pool stands (status.rollout), not
// from one reason of one condition: a rollout halted by its health gate or
// by a drain under onTimeout Halt runs no change without a person, whatever
// the pool's policy (a drain-halted pool was forecast to roll "now"); a
// pool that is not halted rolls it now. The world then does what the
// forecast says.
func TestAForecastReadsAHaltFromWhereThePoolStands(t *testing.T) {
	rolls := func(np *nodepoolv1.NodePool) {
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	}
	for _, tc := range []struct {
		name    string
		edit    func(*nodepoolv1.NodePool)
		halt    func(w *World, p *Pool)
		when    string
		message string // in the forecast's reason
	}{
		{name: "settled", edit: rolls, when: WhenNow},
		{name: "halted by its health gate", edit: func(np *nodepoolv1.NodePool) {
			rolls(np)
			np.Spec.Management.Health = health(1, 30*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
		}, halt: func(w *World, p *Pool) {
			badConfig(w, "c2", 10*time.Minute)
			w.After(time.Minute, "owner edits the config to c2 (bad after 10m)", func(*World) { p.Inputs.Config = "c2" })
		}, when: WhenNever, message: "halted: "},
		{name: "halted by a drain", edit: func(np *nodepoolv1.NodePool) {
			rolls(np)
			np.Spec.Management.Health = health(1, 10*time.Minute, 0, nodepoolv1.FailurePolicyHalt)
			drainPolicy(nodepoolv1.DrainHalt, 30*time.Minute)(np)
		}, halt: func(w *World, p *Pool) {
			p.DrainBlocked = true
			w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
		}, when: WhenNever, message: GuardedBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(t0)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: tc.edit})
			if tc.halt != nil {
				tc.halt(w, p)
				run(t, w, 3*time.Hour)
				if s := p.Obj.Status.Rollout; s == nil || s.Phase != nodepoolv1.RolloutPhaseHalted {
					t.Fatalf("status.rollout %+v, want Halted\n%s", s, w.Trace())
				}
			}
			now := w.Now
			fc := forecastNow(w, 5*24*time.Hour, p)
			f := fc.Pools[0]
			t.Logf("%s: %s start %v end %v holds %v: %s", tc.name, f.When, f.Start, f.End, f.Holds, f.Reason)
			if f.When != tc.when || !strings.Contains(f.Reason, tc.message) {
				t.Errorf("forecast %s (%s), want %s naming %q", f.When, f.Reason, tc.when, tc.message)
			}
			if tc.when == WhenNever && !slices.Contains(f.Holds, "halted") {
				t.Errorf("holds %v, want halted", f.Holds)
			}
			changeProxyDefaults(w, p)
			run(t, w, 2*24*time.Hour)
			latest := latestHash(p)
			got := firstRollout(p, now)
			switch {
			case tc.when == WhenNever && onPayloads(p)[latest] > 0:
				t.Errorf("forecast never, the pool booted the latest payload on %d machines\n%s", onPayloads(p)[latest], w.Trace())
			case tc.when != WhenNever && (got == nil || got.PayloadHash != latest):
				t.Errorf("forecast %s, the pool did not roll the latest payload: %+v\n%s", tc.when, got, w.Trace())
			}
		})
	}
}

// A person's request the pool holds is part of its forecast (RunForecast
// once built the pool from its spec and labels only): an apply-pending
// waiting for Saturday's window rolls in that window — it was forecast
// never, and `fleet forecast` exited 4 —, so does a restart the pause
// holds until then (a past rolloutAfter was taken as done), one asked outside
// the windows with a reason rolls now, one a fleet rollout wrote rolls by
// the fleet; an apply-pending carried out long ago asks for nothing. The
// world then does what the forecast says.
func TestAForecastKeepsThePoolsRequests(t *testing.T) {
	saturday := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC) // t0 is a Monday
	windows := func(np *nodepoolv1.NodePool) {
		np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesOnNextRollout
		np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
			{Schedule: "0 9 * * 6", Duration: metav1.Duration{Duration: 6 * time.Hour}, TimeZone: "UTC"}}}
	}
	for _, tc := range []struct {
		name      string
		edit      func(*nodepoolv1.NodePool)
		request   func(w *World, p *Pool)
		when      string
		start     time.Time // zero: now (the forecast's)
		initiator rollout.Initiator
		rolling   bool // forecast while its rollout rolls
	}{
		{name: "apply-pending waits for Saturday's window", edit: windows, request: func(w *World, p *Pool) { ApplyPending(p, "") },
			when: WhenWindow, start: saturday, initiator: rollout.InitiatorPlatform},
		{name: "restart waits for the pause to end on Saturday", request: func(w *World, p *Pool) {
			at := metav1.NewTime(w.Now.Add(time.Second).Truncate(time.Second))
			p.Obj.Spec.Management.RolloutAfter = &at
			p.Obj.Spec.Management.PausedUntil = saturday.Format(time.RFC3339)
		}, when: WhenPause, start: saturday, initiator: rollout.InitiatorRestart},
		{name: "apply-pending of a fleet rollout waits for Saturday's window", edit: windows, request: func(w *World, p *Pool) {
			ApplyPending(p, "")
			p.setAnnotation(nodepoolv1.AnnotationFleetRollout, "platform")
		}, when: WhenFleet, start: saturday, initiator: rollout.Initiator(nodepoolv1.FleetRolloutInitiator("platform"))},
		{name: "apply-pending outside the windows", edit: windows, request: func(w *World, p *Pool) { ApplyPending(p, "CVE-2026-1234") },
			when: WhenNow, initiator: rollout.InitiatorPlatform, rolling: true},
		{name: "apply-pending carried out before the change", edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesOnNextRollout
		}, request: func(w *World, p *Pool) { ApplyPending(p, "") }, when: WhenNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(t0)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 2, Edit: tc.edit})
			if tc.when != WhenNever {
				changeProxyDefaults(w, p)
			}
			w.After(time.Minute, "a person asks", func(w *World) { tc.request(w, p) })
			if tc.rolling {
				run(t, w, 3*time.Minute)
				if s := p.Obj.Status.Rollout; s == nil || s.Phase != nodepoolv1.RolloutPhaseRolling {
					t.Fatalf("status.rollout %+v, want Rolling\n%s", s, w.Trace())
				}
			} else {
				run(t, w, 2*time.Hour)
			}
			if tc.when == WhenNever {
				changeProxyDefaults(w, p)
				run(t, w, time.Minute)
			}
			now := w.Now
			fc := forecastNow(w, 10*24*time.Hour, p)
			f := fc.Pools[0]
			t.Logf("%s: %s start %v end %v holds %v: %s", tc.name, f.When, f.Start, f.End, f.Holds, f.Reason)
			if f.When != tc.when {
				t.Errorf("forecast %s (%s), want %s", f.When, f.Reason, tc.when)
			}
			run(t, w, 8*24*time.Hour)
			var got *Record
			for i := range p.History {
				if r := &p.History[i]; r.PayloadHash == latestHash(p) && r.Outcome == OutcomeComplete {
					got = r
					break
				}
			}
			if tc.when == WhenNever {
				if got != nil && got.Started.After(now) {
					t.Errorf("forecast never, the pool rolled the latest payload at %s (%s)\n%s", got.Started, got.Initiator, w.Trace())
				}
				return
			}
			if got == nil || f.Start == nil || f.End == nil {
				t.Fatalf("forecast %v–%v, the pool rolled %+v\n%s", f.Start, f.End, got, w.Trace())
			}
			want := tc.start
			if want.IsZero() {
				want = now
			}
			if d := f.Start.Sub(want); d < -2*time.Minute || d > 2*time.Minute {
				t.Errorf("forecast to start at %s, want %s", f.Start, want)
			}
			if got.Initiator != tc.initiator {
				t.Errorf("the pool rolled it as %s, want %s", got.Initiator, tc.initiator)
			}
			if !tc.start.IsZero() {
				if d := got.Started.Sub(*f.Start); d < -2*time.Minute || d > 2*time.Minute {
					t.Errorf("forecast to start at %s, started at %s", f.Start, got.Started)
				}
			}
			if got.Completed.After(f.End.Add(5 * time.Minute)) {
				t.Errorf("forecast to end by %s, ended at %s", f.End, got.Completed)
			}
		})
	}
}
