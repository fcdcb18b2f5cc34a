package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/scenario"
)

// The fleet's PHASE is the phase the controller published for each pool
// (status.rollout.phase), not one the CLI works out: a pool whose
// restart the pause holds is Held, one without a published standing "-".
func TestTheFleetShowsThePublishedPhaseOfEachPool(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	held := settledInput(t, inputstest.New(), now)
	held.Pool.Name = "held"
	held.Pool.Spec.Management.PausedUntil = "true"
	held.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = now.Add(-time.Minute).Format(time.RFC3339)
	plan := rollout.Decide(held)
	if plan.Decision.Standing.Phase != rollout.PhaseHeld {
		t.Fatalf("the engine's standing is %s, want Held", plan.Decision.Standing.Phase)
	}
	held.Pool.Status.Rollout = plan.Decision.Standing.Published()
	unknown := settledInput(t, inputstest.New(), now).Pool
	unknown.Name = "unknown"
	rows := fleetRows(now, []nodepoolv1.NodePool{*held.Pool, *unknown}, false)
	if len(rows) != 2 || rows[0].Phase != "Held" || rows[1].Phase != "" {
		t.Fatalf("rows %+v, want phases Held and none", rows)
	}
	var out strings.Builder
	if err := fleetTable(now, rows).print(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	col := strings.Index(lines[0], "PHASE")
	if col < 0 || len(lines) != 3 || !strings.HasPrefix(lines[1][col:], "Held ") || !strings.HasPrefix(lines[2][col:], "- ") {
		t.Errorf("fleet table, want a PHASE column Held and -:\n%s", out.String())
	}
}

// The fleet's RUNS-LATEST reads where each pool stands and the requests
// it holds: a pool its drain halted (RolloutHealthy DrainHalted, not
// RolloutHalted) was forecast to roll now, and an apply-pending waiting
// for Saturday's window was forecast never; the first never runs the
// change without a person, the second runs it in that window. A pool
// under managementUpdates Rollout whose drift the cluster saw days ago
// rolls now (it was forecast never: its desiredSince was taken as older
// than the model's machines).
func TestTheFleetForecastsHaltsAndHeldRequestsFromThePools(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // a Tuesday
	saturday := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	pool := func(name string, policy nodepoolv1.ManagementUpdatePolicy, edit func(*nodepoolv1.NodePool)) nodepoolv1.NodePool {
		p := nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Generation: 1}}
		p.Spec.ClusterName, p.Spec.Replicas, p.Spec.Release.Version = "c", ptr.To[int32](2), "v1.36.3"
		p.Spec.Management.ManagementUpdates = policy
		p.Status.ObservedGeneration, p.Status.Replicas, p.Status.ReadyReplicas, p.Status.UpdatedReplicas = 1, 2, 2, 2
		p.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{Component: "apiserver-proxy", Since: metav1.NewTime(now.Add(-72 * time.Hour)), Current: "a", Desired: "b"}}
		p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true}
		if edit != nil {
			edit(&p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pool nodepoolv1.NodePool
		at   *time.Time
		how  string
	}{
		{name: "settled under managementUpdates Rollout", pool: pool("rolls", nodepoolv1.ManagementUpdatesRollout, nil), at: &now, how: scenario.WhenNow},
		{name: "halted by a drain", pool: pool("drain-halted", nodepoolv1.ManagementUpdatesRollout, func(p *nodepoolv1.NodePool) {
			msg := "rollout halted: node n-1 (machine m-1) did not drain within 30m0s"
			p.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonDrainHalted, Message: msg}}
			p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Message: msg, Changing: []string{"Config"}}
		}), how: "never: halted: rollout halted: node n-1 (machine m-1) did not drain within 30m0s"},
		{name: "apply-pending waiting for Saturday's window", pool: pool("saturday", nodepoolv1.ManagementUpdatesOnNextRollout, func(p *nodepoolv1.NodePool) {
			p.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: now.Add(-24 * time.Hour).Format(time.RFC3339)}
			p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
				{Schedule: "0 9 * * 6", Duration: metav1.Duration{Duration: 6 * time.Hour}, TimeZone: "UTC"}}}
			until := metav1.NewTime(saturday)
			p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHeld, Settled: true, Changing: []string{"Forced"},
				Held: &nodepoolv1.RolloutHold{By: string(rollout.HeldByMaintenanceWindow), Until: &until, Message: "outside its maintenance windows"}}
		}), at: &saturday, how: scenario.WhenWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools := []nodepoolv1.NodePool{tc.pool}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.pool.DeepCopy()).Build()
			o := &Options{Now: func() time.Time { return now }, client: c}
			rows := fleetRows(now, pools, false)
			if err := o.runsLatest(context.Background(), c, now, rows, pools); err != nil {
				t.Fatal(err)
			}
			r := rows[0]
			t.Logf("%s: %v %s", tc.name, r.RunsLatestAt, r.RunsLatest)
			if !strings.HasPrefix(r.RunsLatest, tc.how) {
				t.Errorf("runs latest %q, want %q", r.RunsLatest, tc.how)
			}
			switch {
			case tc.at == nil && r.RunsLatestAt != nil:
				t.Errorf("runs latest at %s, want never", r.RunsLatestAt)
			case tc.at != nil && (r.RunsLatestAt == nil || r.RunsLatestAt.Before(*tc.at) || r.RunsLatestAt.After(tc.at.Add(2*time.Hour))):
				t.Errorf("runs latest at %v, want within 2h after %s", r.RunsLatestAt, tc.at)
			}
		})
	}
}
