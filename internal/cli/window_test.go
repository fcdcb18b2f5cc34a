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

// A restart the owner gated waits for the window: status says Paused with
// the window's time, plan says "rolls at <time> (next window)", fleet
// shows the next window.
func TestARolloutHeldByTheWindowSaysWhenItRolls(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // Tuesday
	w := inputstest.New()
	w.Pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
		Windows: []nodepoolv1.MaintenanceWindow{{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
		Gate:    []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart},
	}
	in := settledInput(t, w, now)
	past := metav1.NewTime(now.Add(-time.Minute))
	in.Pool.Spec.Management.RolloutAfter = &past
	for _, took := range []time.Duration{time.Hour, 2 * time.Hour, 90 * time.Minute} {
		in.RecentRollouts = append(in.RecentRollouts, poolmath.PastRollout{Shape: poolmath.Shape{Machines: 3, Rounds: 3}, Took: took, Complete: true})
	}
	plan := rollout.Decide(in)
	opens := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC) // 02:00 Berlin

	st := statusOf(in.Pool, plan, now)
	if st.Phase != PhasePaused || st.RollsAt == nil || !st.RollsAt.Equal(opens) || !strings.Contains(st.Message, "waits for the next maintenance window") {
		t.Errorf("status %+v, want Paused until %v", st, opens)
	}
	if st.NextWindow == nil || !st.NextWindow.Equal(opens) {
		t.Errorf("status next window %v, want %v", st.NextWindow, opens)
	}

	r := Predict(in, plan, in.Pool, in.Pool)
	if r.Rollout != PlanDeferred || !strings.Contains(r.Message, "nodes roll at 2026-12-05T01:00:00Z (next window)") {
		t.Errorf("plan %s: %s", r.Rollout, r.Message)
	}
	if !strings.Contains(r.Message, "a rollout of 3 machine(s) in 3 round(s) takes about 1h30m0s (from 3 rollouts, 1h0m0s–2h0m0s): it fits the 4h0m0s of the window") {
		t.Errorf("plan does not say whether the rollout fits: %s", r.Message)
	}

	in.Pool.Status.Maintenance = plan.Maintenance
	rows := fleetRows(now, []nodepoolv1.NodePool{*in.Pool}, false)
	if len(rows) != 1 || rows[0].NextWindow == nil || !rows[0].NextWindow.Equal(opens) {
		t.Fatalf("fleet rows %+v, want the next window", rows)
	}
	var out strings.Builder
	if err := fleetTable(now, rows).print(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "NEXT-WINDOW") || !strings.Contains(out.String(), "2026-12-05T01:00:00Z (in 3d13h)") {
		t.Errorf("fleet table:\n%s", out.String())
	}
}

func TestTheEmergencyPathNeedsAReason(t *testing.T) {
	for _, tc := range []struct {
		f    outsideWindowsFlags
		want string
	}{
		{outsideWindowsFlags{outside: true}, "--outside-windows needs --reason"},
		{outsideWindowsFlags{outside: true, reason: "  "}, "--outside-windows needs --reason"},
		{outsideWindowsFlags{reason: "why"}, "--reason goes with --outside-windows"},
		{outsideWindowsFlags{outside: true, reason: "CVE-2026-1234"}, ""},
	} {
		err := tc.f.check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	p := &nodepoolv1.NodePool{}
	f := outsideWindowsFlags{outside: true, reason: "CVE-2026-1234"}
	at := time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC)
	f.set(p, at)
	if p.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] != "2026-12-01T12:00:01Z" || p.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] != "CVE-2026-1234" {
		t.Errorf("annotations %v", p.Annotations)
	}
}

// A window that is always open (daily for 48h) has no start: the fleet
// says it is open, not "-", and the restart warning says nothing of a
// next window.
func TestAWindowThatIsAlwaysOpenShowsOpen(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := inputstest.New()
	w.Pool.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
		Windows: []nodepoolv1.MaintenanceWindow{{Schedule: "0 8 * * *", Duration: metav1.Duration{Duration: 48 * time.Hour}, TimeZone: "UTC"}},
	}
	in := settledInput(t, w, now)
	plan := rollout.Decide(in)
	in.Pool.Status.Maintenance = plan.Maintenance
	if st := statusOf(in.Pool, plan, now); st.NextWindow != nil {
		t.Errorf("status next window %v, want none while open", st.NextWindow)
	}
	rows := fleetRows(now, []nodepoolv1.NodePool{*in.Pool}, false)
	var out strings.Builder
	if err := fleetTable(now, rows).print(&out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.Contains(out.String(), "NEXT-WINDOW") || !strings.Contains(lines[1], " open ") {
		t.Errorf("fleet table, want NEXT-WINDOW open:\n%s", out.String())
	}
}
