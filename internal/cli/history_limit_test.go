package cli

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestRolloutHistorySaysHowManyRolloutsThePoolKeeps(t *testing.T) {
	pool := &nodepoolv1.NodePool{}
	pool.Spec.Management.RevisionHistoryLimit = ptr.To[int32](3)
	if got := historyLimitNote(pool); !strings.Contains(got, "the last 3 finished rollouts") || !strings.Contains(got, "spec.management.revisionHistoryLimit") {
		t.Errorf("limit 3: %q", got)
	}
	pool.Spec.Management.RevisionHistoryLimit = ptr.To[int32](0)
	if got := historyLimitNote(pool); !strings.Contains(got, "no finished rollout") {
		t.Errorf("limit 0: %q", got)
	}
	pool.Spec.Management.RevisionHistoryLimit = nil
	if got := historyLimitNote(pool); !strings.Contains(got, "--history-limit") {
		t.Errorf("no limit in the spec: %q", got)
	}
}
