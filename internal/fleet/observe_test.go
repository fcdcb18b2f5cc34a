package fleet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// A fleet reads where a pool stands from status.rollout, as `rollout
// status` does: a halt is a Halted (or RollingBack) standing, whatever
// condition says it, and a RolloutHealthy=False the standing no longer
// calls a halt (a fix that waits for its window: Held) is not a failure.
func TestAFleetReadsAHaltFromThePoolsStanding(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	halted := metav1.Condition{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonRolloutHalted, Message: "machine m-1 failed"}
	for _, tc := range []struct {
		name     string
		standing *nodepoolv1.RolloutStanding
		conds    []metav1.Condition
		want     bool
	}{
		{"halted by its health gate", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Message: "machine m-1 failed"}, []metav1.Condition{halted}, true},
		{"halted with no condition said yet", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Message: "the forced rollout's canary failed"}, nil, true},
		{"rolling back", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseRollingBack}, []metav1.Condition{halted}, true},
		{"the fix waits for its window", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHeld, Message: "the owner's change waits for the window"}, []metav1.Condition{halted}, false},
		{"settled", &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true}, nil, false},
		{"an older controller (no standing)", nil, []metav1.Condition{halted}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &nodepoolv1.NodePool{}
			pool.Status.Rollout, pool.Status.Conditions = tc.standing, tc.conds
			got := Observe(pool, now).Unhealthy
			if (got != nil) != tc.want {
				t.Fatalf("unhealthy = %+v, want %v", got, tc.want)
			}
			if got != nil && (got.Reason == "" || got.Message == "") {
				t.Errorf("the failure names no reason or message: %+v", got)
			}
		})
	}
}
