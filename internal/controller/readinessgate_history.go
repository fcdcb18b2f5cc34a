package controller

import (
	appsv1 "k8s.io/api/apps/v1"

	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

// rollbackEntry completes the history entry of a health-gate rollback: it
// names the failed revision, and carries the spec and sources of the
// revision it returns to (the pool's spec still asks for the failed one).
func rollbackEntry(e *history.Entry, owned []appsv1.ControllerRevision, rec *rollout.Record) {
	if rec.RollbackOf == "" {
		return
	}
	for i := len(owned) - 1; i >= 0; i-- {
		old, err := history.Decode(&owned[i])
		if err != nil {
			continue
		}
		if e.RollbackOf == 0 && old.RolloutHash == rec.RollbackOf {
			e.RollbackOf = old.Revision
		}
		if old.RolloutHash == rec.RolloutHash && old.Initiator != string(rollout.InitiatorRollback) {
			e.Spec, e.Sources = old.Spec, old.Sources
			break
		}
	}
}
