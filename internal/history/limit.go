package history

import (
	appsv1 "k8s.io/api/apps/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Limit is how many finished records the pool keeps:
// spec.management.revisionHistoryLimit, or fallback (the controller's
// --history-limit) for a pool whose spec has none (one the API server did
// not default).
func Limit(pool *nodepoolv1.NodePool, fallback int) int {
	if l := pool.Spec.Management.RevisionHistoryLimit; l != nil {
		return int(max(*l, 0))
	}
	return fallback
}

// Prunable returns the records to delete, oldest first, so that at most
// limit finished ones remain among records (sorted oldest first): the
// oldest finished ones. A rollout in progress is never pruned, nor the
// current rollout's record (Current), which keeps what the engine knows
// about it (a rollback that holds) even once finished. A negative limit
// prunes nothing.
func Prunable(records []appsv1.ControllerRevision, limit int) []appsv1.ControllerRevision {
	if limit < 0 {
		return nil
	}
	cur := Current(records)
	keep := func(cr *appsv1.ControllerRevision) bool {
		return cr.Annotations[AnnotationOutcome] == OutcomeInProgress || cur != nil && cur.Revision == cr.Revision
	}
	finished := 0
	for i := range records {
		if records[i].Annotations[AnnotationOutcome] != OutcomeInProgress {
			finished++
		}
	}
	var out []appsv1.ControllerRevision
	for i := range records {
		if finished <= limit {
			break
		}
		if !keep(&records[i]) {
			out = append(out, records[i])
			finished--
		}
	}
	return out
}
