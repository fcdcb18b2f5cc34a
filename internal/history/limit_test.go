package history_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

func records(outcomes ...string) []appsv1.ControllerRevision {
	out := make([]appsv1.ControllerRevision, len(outcomes))
	for i, o := range outcomes {
		out[i].Revision = int64(i + 1)
		out[i].Annotations = map[string]string{history.AnnotationOutcome: o}
	}
	return out
}

func TestThePrunedRecordsAreTheOldestFinishedBeyondTheLimit(t *testing.T) {
	const done, superseded, running = history.OutcomeComplete, history.OutcomeSuperseded, history.OutcomeInProgress
	for _, tc := range []struct {
		records []appsv1.ControllerRevision
		limit   int
		want    []int64
	}{
		{records(done, done, done), 10, nil},
		{records(done, done, done), 3, nil},
		{records(done, superseded, done, running), 2, []int64{1}},
		{records(done, done, done, running), 0, []int64{1, 2, 3}},
		// A rollout in progress is never pruned, however old.
		{records(running, done, done), 1, []int64{2}},
		{records(running), 0, nil},
		// Nor the current rollout's record, finished or not: it keeps
		// what the engine knows about it.
		{records(done, done), 0, []int64{1}},
		{records(done, done), -1, nil}, // no limit read: nothing pruned
	} {
		var got []int64
		for _, cr := range history.Prunable(tc.records, tc.limit) {
			got = append(got, cr.Revision)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("limit %d over %d records: pruned %v, want %v", tc.limit, len(tc.records), got, tc.want)
		}
	}
}

func TestTheLimitIsThePoolsOrTheControllersDefault(t *testing.T) {
	pool := &nodepoolv1.NodePool{}
	for _, tc := range []struct {
		spec     *int32
		fallback int
		want     int
	}{{nil, 10, 10}, {nil, 3, 3}, {ptr.To[int32](0), 10, 0}, {ptr.To[int32](25), 10, 25}} {
		pool.Spec.Management.RevisionHistoryLimit = tc.spec
		if got := history.Limit(pool, tc.fallback); got != tc.want {
			t.Errorf("spec %v, fallback %d: limit %d, want %d", fmt.Sprint(ptr.Deref(tc.spec, -1)), tc.fallback, got, tc.want)
		}
	}
}
