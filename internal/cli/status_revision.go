package cli

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// StatusRevision is the pool's current rollout as its history records it
// (`kubectl nodepool rollout history --revision N` shows it in full): the
// newest record, the rollout in progress or, when none is, the one the
// machines run. A rollout that waits (a pause, a window, a schedule) has
// no record until it starts.
type StatusRevision struct {
	Revision  int64  `json:"revision"`
	Initiator string `json:"initiator"`
	// Outcome is InProgress (halted included), Complete, Failed or
	// Superseded.
	Outcome string    `json:"outcome,omitempty"`
	Started time.Time `json:"started"`
	// RollbackOf is, for a health gate's rollback, the revision that failed.
	RollbackOf int64 `json:"rollbackOf,omitempty"`
}

// statusRevision reads the pool's current rollout from its history (nil
// when none is recorded, or the history cannot be read: the status goes
// on without it).
func statusRevision(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) *StatusRevision {
	entries, err := revisions(ctx, c, pool) // history.go
	if err != nil || len(entries) == 0 {
		// The history cannot be read (a user may see the pool but not
		// its ControllerRevisions): the number the controller publishes.
		if r := pool.Status.Rollout; r != nil && r.Revision > 0 {
			return &StatusRevision{Revision: r.Revision}
		}
		return nil
	}
	return currentRevision(entries)
}

// currentRevision is the newest of the records, oldest first (nil when
// there are none).
func currentRevision(entries []history.Entry) *StatusRevision {
	if len(entries) == 0 {
		return nil
	}
	e := entries[len(entries)-1]
	for _, o := range entries {
		if o.Revision > e.Revision {
			e = o
		}
	}
	return &StatusRevision{Revision: e.Revision, Initiator: e.Initiator, Outcome: e.Outcome, Started: e.Started.UTC(), RollbackOf: e.RollbackOf}
}

// revisionWords names the revision in the status line: "revision 7
// (spec)"; with its outcome when it has ended and the pool is not settled
// on it ("revision 7 (spec, Complete)" while a rollout without a record
// yet waits), "" without a record.
func (st RolloutStatus) revisionWords() string {
	r := st.Revision
	if r == nil {
		return ""
	}
	who := r.Initiator
	if r.RollbackOf > 0 {
		who = fmt.Sprintf("%s of %d", r.Initiator, r.RollbackOf)
	}
	if r.Outcome != "" && r.Outcome != history.OutcomeInProgress && !(r.Outcome == history.OutcomeComplete && st.Phase == PhaseComplete) {
		who += ", " + r.Outcome
	}
	if who == "" { // only the number the controller publishes
		return fmt.Sprintf("revision %d", r.Revision)
	}
	return fmt.Sprintf("revision %d (%s)", r.Revision, who)
}
