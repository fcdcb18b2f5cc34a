package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// What `rollout restart` and `rollout apply-pending` say about when the
// request rolls is the engine's decision for the pool as it is after the
// request, not the Platform gate's next window: a restart the windows do
// not gate starts now.
func TestARequestSaysWhenTheEngineRollsIt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // Tuesday
	opens := "2026-12-05T01:00:00Z"                      // Saturday 02:00 Berlin
	emergency := &outsideWindowsFlags{outside: true, reason: "CVE-2026-1234"}
	for _, tc := range []struct {
		name string
		gate []nodepoolv1.GatedRollout
		// apply: apply-pending rather than restart.
		apply bool
		flags *outsideWindowsFlags
		// freeze: an unbreakable exclusion of every rollout until Friday noon.
		freeze bool
		want   string
	}{
		{name: "a restart of a pool whose windows gate only Platform starts now",
			want: "rolls now: its maintenance windows do not gate a restart"},
		{name: "a restart of a pool whose gate lists Restart waits for the window",
			gate: []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart},
			want: "rolls in its next maintenance window, at " + opens},
		{name: "apply-pending waits for the window",
			apply: true, want: "rolls in its next maintenance window, at " + opens},
		{name: "apply-pending outside the windows starts now",
			apply: true, flags: emergency, want: "rolls now, outside its maintenance windows (reason: CVE-2026-1234)"},
		{name: "a restart outside the windows waits for an unbreakable exclusion",
			gate: []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart}, flags: emergency, freeze: true,
			want: `does not roll now: a rollout (restart) waits: the maintenance exclusion "freeze" holds it; it starts at 2026-12-04T12:00:00Z`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
				Windows: []nodepoolv1.MaintenanceWindow{{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
				Gate:    tc.gate,
			}
			if tc.freeze {
				w.Pool.Spec.Management.Maintenance.Exclusions = []nodepoolv1.MaintenanceExclusion{{Name: "freeze", Unbreakable: true,
					Start: metav1.NewTime(now.Add(-time.Hour)), End: metav1.NewTime(now.Add(72 * time.Hour))}}
			}
			in := settledInput(t, w, now)
			in.Pool.Status.Maintenance = rollout.Decide(in).Maintenance // as the controller last wrote it
			flags := tc.flags
			if flags == nil {
				flags = &outsideWindowsFlags{}
			}
			when := poolmath.ForcedNow(now)
			request := restartRequest(when, flags)
			if tc.apply {
				request = applyPendingRequest(when, flags)
			}
			request(in.Pool)
			in.Now = when
			d := rollout.Decide(in).Decision
			var out strings.Builder
			sayWhenItRolls(&out, in.Pool, d, when, now, flags)
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("engine decides %s (%+v); the CLI says %q, want %q", d.Action, d.Window.Hold, out.String(), tc.want)
			}
		})
	}
}

// A restart the windows do not gate starts now, outside the windows: the
// CLI words that (the engine's Window.Ungated), and neither plan nor the
// rollout's record says it fits the next window, whose length says nothing
// of a rollout that starts before it. The same restart gated by the
// windows starts in that window and is said to fit it.
func TestARestartTheWindowsDoNotGateIsNotWordedForTheNextWindow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // Tuesday, outside Saturday's window
	fits := "it fits the 4h0m0s of the window"
	for _, tc := range []struct {
		name    string
		gate    []nodepoolv1.GatedRollout
		action  rollout.Action
		says    string
		fitSaid bool
	}{
		{name: "ungated: rolls now, no fit", action: rollout.ActionForce, says: "rolls now: its maintenance windows do not gate a restart"},
		{name: "gated: rolls in the window, which it fits", gate: []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart},
			action: rollout.ActionDefer, says: "rolls in its next maintenance window", fitSaid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
				Windows: []nodepoolv1.MaintenanceWindow{{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
				Gate:    tc.gate,
			}
			in := settledInput(t, w, now)
			for _, took := range []time.Duration{time.Hour, 2 * time.Hour, 90 * time.Minute} {
				in.RecentRollouts = append(in.RecentRollouts, poolmath.PastRollout{Shape: poolmath.Shape{Machines: 3, Rounds: 3}, Took: took, Complete: true})
			}
			when := poolmath.ForcedNow(now)
			restartRequest(when, &outsideWindowsFlags{})(in.Pool)
			in.Now = when
			plan := rollout.Decide(in)
			d := plan.Decision
			if d.Action != tc.action || d.Window.Ungated != (tc.gate == nil) {
				t.Fatalf("engine decides %s (ungated %v), want %s", d.Action, d.Window.Ungated, tc.action)
			}
			var out strings.Builder
			sayWhenItRolls(&out, in.Pool, d, when, now, &outsideWindowsFlags{})
			if !strings.Contains(out.String(), tc.says) {
				t.Errorf("the CLI says %q, want %q", out.String(), tc.says)
			}
			r := Predict(in, plan, in.Pool, in.Pool)
			if strings.Contains(r.Message, fits) != tc.fitSaid || strings.Contains(r.Window, fits) != tc.fitSaid {
				t.Errorf("plan says %q (window %q); want the fit said: %v", r.Message, r.Window, tc.fitSaid)
			}
			if plan.Record != nil && strings.Contains(plan.Record.Reason, fits) {
				t.Errorf("the record of a restart that starts now says %q", plan.Record.Reason)
			}
		})
	}
}
