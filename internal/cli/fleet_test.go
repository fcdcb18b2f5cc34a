package cli

import (
	"strings"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout"
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
