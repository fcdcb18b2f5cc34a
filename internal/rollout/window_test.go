package rollout

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// t0 is Monday 2026-11-30 12:00 UTC. The window opens daily at 12:30 UTC
// for an hour.
func daily() *nodepoolv1.Maintenance {
	return &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
		Schedule: "30 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}}
}

var (
	opens  = t0.Add(30 * time.Minute)
	inside = t0.Add(45 * time.Minute)
)

// withDrift makes platform drift pending since the given time.
func withDrift(t *testing.T, in Input, w *inputstest.World, since time.Time) Input {
	t.Helper()
	bumpProxyImage(w)
	in = relatest(t, in, w)
	p := Decide(in)
	if len(p.Pending) == 0 {
		t.Fatal("no drift pending")
	}
	for _, r := range p.Pending {
		r.Since = metav1.NewTime(since)
		in.Pool.Status.PendingManagementChanges = append(in.Pool.Status.PendingManagementChanges, r)
	}
	return in
}

func TestMaintenanceWindows(t *testing.T) {
	applyPending := func(in *Input, at time.Time) {
		in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = at.Format(time.RFC3339)
	}
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, w *inputstest.World, in *Input)
		action    Action
		initiator Initiator
		// reason of MaintenanceWindow and, for a held rollout, of the
		// updating condition named by held.
		reason string
		held   string
		check  func(t *testing.T, in Input, p Plan)
	}{
		{name: "apply-pending outside the window waits for it and looks again when it opens",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if p.Record != nil || p.MachineDeployment.RolloutAfter != nil {
					t.Errorf("nothing may start outside the window: record %+v", p.Record)
				}
				if p.RequeueAfter != 30*time.Minute+time.Second {
					t.Errorf("requeue after %v, want at the window's opening (30m1s)", p.RequeueAfter)
				}
				if h := p.Decision.Window.Hold; h == nil || !h.Until().Equal(opens) {
					t.Errorf("hold %+v, want until %v", h, opens)
				}
				if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); !strings.Contains(c.Message, "next window: 2026-11-30T12:30:00Z (window until 2026-11-30T13:30:00Z)") {
					t.Errorf("MaintenanceWindow message %q does not name the next window", c.Message)
				}
				if st := p.Maintenance; st == nil || st.NextWindow == nil || !st.NextWindow.Start.Time.Equal(opens) || st.Waiting == "" {
					t.Errorf("status.maintenance = %+v", st)
				}
				if !hasEvent(p, nodepoolv1.EventRolloutDeferred) {
					t.Error("no RolloutDeferred event")
				}
			}},
		{name: "apply-pending inside the window starts",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.Now = inside
			},
			action: ActionForce, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonInMaintenanceWindow,
			check: func(t *testing.T, in Input, p Plan) {
				if p.Record == nil || p.Record.Initiator != InitiatorPlatform {
					t.Errorf("record %+v, want a platform rollout", p.Record)
				}
			}},
		{name: "the Rollout policy waits for the window",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
				in.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
			},
			action: ActionDefer, initiator: InitiatorPolicy, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig},
		{name: "an owner change rolls at once by default",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
				*in = relatest(t, *in, w)
			},
			action: ActionStart, initiator: InitiatorSpec, reason: nodepoolv1.ReasonOutsideMaintenanceWindow},
		{name: "an owner change waits when the owner opted in",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
				*in = relatest(t, *in, w)
				in.Pool.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
			},
			action: ActionDefer, initiator: InitiatorSpec, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if p.MachineDeployment.DataSecretName != in.MachineDeployment.DataSecretName || p.Record != nil {
					t.Error("a held owner change must keep the MachineDeployment's target and record nothing")
				}
			}},
		{name: "a version change that waits says so on UpdatingVersion",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Release.Version = "v1.36.4"
				*in = relatest(t, *in, w)
				in.Pool.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
			},
			action: ActionDefer, initiator: InitiatorVersion, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingVersion},
		{name: "an owner change inside the window rolls when opted in",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Release.Version = "v1.36.4"
				*in = relatest(t, *in, w)
				in.Pool.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
				in.Now = inside
			},
			action: ActionStart, initiator: InitiatorVersion, reason: nodepoolv1.ReasonInMaintenanceWindow},
		{name: "a restart rolls at once by default",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				past := metav1.NewTime(t0.Add(-time.Minute))
				in.Pool.Spec.Management.RolloutAfter = &past
			},
			action: ActionForce, initiator: InitiatorRestart, reason: nodepoolv1.ReasonOutsideMaintenanceWindow},
		{name: "a restart waits when the owner opted in",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				past := metav1.NewTime(t0.Add(-time.Minute))
				in.Pool.Spec.Management.RolloutAfter = &past
				in.Pool.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart}
			},
			action: ActionDefer, initiator: InitiatorRestart, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig},
		{name: "drift older than the deadline waits for the next window",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-31*24*time.Hour))
				in.Pool.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
			},
			action: ActionDefer, initiator: InitiatorDeadline, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if st := p.Maintenance; st == nil || st.DriftDeadline == nil || !st.DriftDeadline.Time.Equal(t0.Add(-24*time.Hour)) {
					t.Errorf("status.maintenance.driftDeadline = %+v, want a day ago", p.Maintenance)
				}
			}},
		{name: "drift older than the deadline is applied at the first window after it",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-31*24*time.Hour))
				in.Pool.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
				in.Now = inside
			},
			action: ActionForce, initiator: InitiatorDeadline, reason: nodepoolv1.ReasonInMaintenanceWindow,
			check: func(t *testing.T, in Input, p Plan) {
				if p.Record == nil || p.Record.ForcedAt == nil || !p.Record.ForcedAt.Equal(opens) ||
					!strings.Contains(p.Record.Reason, "driftDeadline") {
					t.Errorf("record %+v, want a deadline rollout of machines older than the window's opening, with the reason", p.Record)
				}
				if !hasEvent(p, nodepoolv1.EventDriftDeadlineReached) {
					t.Error("no DriftDeadlineReached event")
				}
			}},
		{name: "drift younger than the deadline stays pending in a window",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-24*time.Hour))
				in.Pool.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
				in.Now = inside
			},
			action: ActionNone, reason: nodepoolv1.ReasonInMaintenanceWindow,
			check: func(t *testing.T, in Input, p Plan) {
				if want := 29*24*time.Hour - 45*time.Minute + time.Second; p.RequeueAfter > time.Hour || p.Maintenance.DriftDeadline == nil {
					t.Errorf("requeue %v (deadline in %v), status %+v", p.RequeueAfter, want, p.Maintenance)
				}
			}},
		{name: "a deadline that falls inside an exclusion waits for the first window after the exclusion",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-30*24*time.Hour-time.Hour))
				m := in.Pool.Spec.Management.Maintenance
				m.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
				m.Exclusions = []nodepoolv1.MaintenanceExclusion{{Name: "freeze", Start: metav1.NewTime(t0.Add(-48 * time.Hour)),
					End: metav1.NewTime(t0.Add(24 * time.Hour)), Scope: nodepoolv1.ExclusionScopePlatform}}
				in.Now = inside
			},
			action: ActionDefer, initiator: InitiatorDeadline, reason: nodepoolv1.ReasonInMaintenanceExclusion, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if h := p.Decision.Window.Hold; h == nil || !h.Until().Equal(opens.Add(24*time.Hour)) {
					t.Errorf("hold %+v, want until the window the day after the freeze", h)
				}
			}},
		{name: "the emergency path rolls outside the window with its reason",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = t0.Add(-time.Minute).Format(time.RFC3339)
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] = "CVE-2026-1234 in the kubelet"
			},
			action: ActionForce, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow,
			check: func(t *testing.T, in Input, p Plan) {
				if p.Record == nil || !strings.Contains(p.Record.Reason, "CVE-2026-1234 in the kubelet") {
					t.Errorf("record %+v, want the reason", p.Record)
				}
				if !hasEvent(p, nodepoolv1.EventRolloutOutsideMaintenanceWindow) {
					t.Error("no RolloutOutsideMaintenanceWindow event")
				}
			}},
		{name: "the emergency path without a reason waits",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = t0.Add(-time.Minute).Format(time.RFC3339)
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if !strings.Contains(p.Maintenance.Waiting, "without "+nodepoolv1.AnnotationOutsideWindowsReason) {
					t.Errorf("waiting %q does not say the reason is missing", p.Maintenance.Waiting)
				}
			}},
		{name: "the emergency path for an older request does not apply to a newer one",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = t0.Add(-time.Hour).Format(time.RFC3339)
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] = "last week's emergency"
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig},
		{name: "an unbreakable exclusion holds even the emergency path",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				in.Pool.Spec.Management.Maintenance.Exclusions = []nodepoolv1.MaintenanceExclusion{{Name: "black-friday",
					Start: metav1.NewTime(t0.Add(-time.Hour)), End: metav1.NewTime(t0.Add(time.Hour)), Scope: nodepoolv1.ExclusionScopeAll, Unbreakable: true}}
				past := metav1.NewTime(t0.Add(-time.Minute))
				in.Pool.Spec.Management.RolloutAfter = &past
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = past.Format(time.RFC3339)
				in.Pool.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] = "please"
			},
			action: ActionDefer, initiator: InitiatorRestart, reason: nodepoolv1.ReasonInMaintenanceExclusion, held: nodepoolv1.ConditionUpdatingConfig},
		{name: "an unknown time zone holds platform rollouts and says so",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				in.Pool.Spec.Management.Maintenance.Windows[0].TimeZone = "Europe/Atlantis"
				applyPending(in, t0.Add(-time.Minute))
				in.Now = inside
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonInvalidMaintenanceSettings, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); !strings.Contains(c.Message, `timeZone "Europe/Atlantis"`) {
					t.Errorf("MaintenanceWindow message %q does not name the field", c.Message)
				}
			}},
		{name: "a forced rollout still running when the window closes runs to completion",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				at := t0.Add(-time.Minute)
				applyPending(in, at)
				in.MachineDeployment.RolloutAfter = &at
				in.MachineDeployment.MachinesBeforeRolloutAfter = 2
				in.MachineDeployment.Complete = false
			},
			action: ActionNone, reason: nodepoolv1.ReasonOutsideMaintenanceWindow,
			check: func(t *testing.T, in Input, p Plan) {
				if p.MachineDeployment.RolloutAfter == nil || !p.Decision.InProgress || p.Updating != "Forced" {
					t.Errorf("the rollout in progress must go on: rollout.after %v, in progress %v, updating %q", p.MachineDeployment.RolloutAfter, p.Decision.InProgress, p.Updating)
				}
			}},
		{name: "recent rollout durations say whether a rollout fits the window",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.RecentRollouts = pastOf3(20*time.Minute, 50*time.Minute, 30*time.Minute)
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				if f := p.Decision.Window.Fit; !strings.Contains(f, "a rollout of 3 machine(s) in 3 round(s) takes about 30m0s (from 3 rollouts, 20m0s–50m0s): it fits the 1h0m0s of the window") {
					t.Errorf("fit %q", f)
				}
			}},
		{name: "a pool grown tenfold is not told its rollout fits the window",
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				*in = withDrift(t, *in, w, t0.Add(-time.Hour))
				applyPending(in, t0.Add(-time.Minute))
				in.RecentRollouts = pastOf3(20*time.Minute, 50*time.Minute, 30*time.Minute)
				in.Pool.Spec.Replicas = ptr.To[int32](30)
				in.MachineDeployment.SpecReplicas = ptr.To[int32](30)
				in.MachineDeployment.MachinesCreated = nil
				for range 30 { // all before the request: it replaces them all
					in.MachineDeployment.MachinesCreated = append(in.MachineDeployment.MachinesCreated, t0.Add(-2*time.Hour))
				}
			},
			action: ActionDefer, initiator: InitiatorPlatform, reason: nodepoolv1.ReasonOutsideMaintenanceWindow, held: nodepoolv1.ConditionUpdatingConfig,
			check: func(t *testing.T, in Input, p Plan) {
				f := p.Decision.Window.Fit
				if !strings.Contains(f, "a rollout of 30 machine(s) in 30 round(s) takes about 5h0m0s (from 3 rollouts, 3h20m0s–8h20m0s): it does not fit the 1h0m0s of the window") {
					t.Errorf("fit %q", f)
				}
				if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); !strings.Contains(c.Message, f) {
					t.Errorf("MaintenanceWindow message %q does not say it", c.Message)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Pool.Spec.Management.Maintenance = daily()
			in := settled(t, w)
			in.Pool.Spec.Management.Maintenance = daily()
			tc.setup(t, w, &in)
			p := Decide(in)
			d := p.Decision
			if d.Action != tc.action || (tc.initiator != "" && d.Initiator != tc.initiator) {
				t.Fatalf("decision %s (%s), want %s (%s); window %+v", d.Action, d.Initiator, tc.action, tc.initiator, d.Window)
			}
			if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); c.Reason != tc.reason {
				t.Errorf("MaintenanceWindow = %+v, want reason %s", c, tc.reason)
			}
			if tc.held != "" {
				if c := cond(p, tc.held); c.Reason != d.Window.Hold.Reason || c.Reason == nodepoolv1.ReasonPaused {
					t.Errorf("%s = %+v, want the hold's reason %s", tc.held, c, d.Window.Hold.Reason)
				}
			}
			if tc.check != nil {
				tc.check(t, in, p)
			}
		})
	}
}

// pastOf3 are completed rollouts of 3 machines in 3 rounds that took
// these durations, newest first.
func pastOf3(took ...time.Duration) []poolmath.PastRollout {
	var out []poolmath.PastRollout
	for _, d := range took {
		out = append(out, poolmath.PastRollout{Shape: poolmath.Shape{Machines: 3, Rounds: 3}, Took: d, Complete: true})
	}
	return out
}

func TestAPoolWithoutMaintenanceSettingsHasNoWindowCondition(t *testing.T) {
	w := inputstest.New()
	p := Decide(settled(t, w))
	if p.Decision.Window != nil || p.Maintenance != nil {
		t.Errorf("window %+v, status %+v", p.Decision.Window, p.Maintenance)
	}
	for _, c := range p.Conditions {
		if c.Type == nodepoolv1.ConditionMaintenanceWindow {
			t.Errorf("unexpected condition %+v", c)
		}
	}
}

// A pool whose maintenance settings bound drift only (no windows, nor an
// exclusion holding now) is always open: status names no next window, since
// the API requires a window's start and this one has none (the status patch
// was refused, and the pool never reconciled).
func TestAPoolWithOnlyADriftDeadlineReportsNoWindowWithoutAStart(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	in.Pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{DriftDeadline: &metav1.Duration{Duration: 720 * time.Hour}}
	p := Decide(in)
	if p.Maintenance == nil {
		t.Fatal("no maintenance status")
	}
	// An always-open interval has no start: the status leaves the field
	// out (it is optional in the CRD), never writes a null the API refuses.
	raw, err := json.Marshal(p.Maintenance)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"start":null`) || strings.Contains(string(raw), `"start":"0001`) {
		t.Errorf("status.maintenance %s writes a start it does not have", raw)
	}
	if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); c.Status != metav1.ConditionTrue {
		t.Errorf("MaintenanceWindow = %+v, want True (always open)", c)
	}
}
