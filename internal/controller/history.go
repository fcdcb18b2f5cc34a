package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
)

// recordHistory writes the plan's rollout record as a new revision, marks
// the one it supersedes, records a completion, and prunes the oldest
// finished revisions beyond the pool's limit (history.Limit): when it
// writes, and when status.revisions lists more than the limit allows (the
// limit was lowered).
func (r *Reconciler) recordHistory(ctx context.Context, pool *nodepoolv1.NodePool, in *inputs.Inputs, plan rollout.Plan) error {
	limit := history.Limit(pool, r.Settings.HistoryLimit)
	if plan.Record == nil && plan.Finish == "" && len(plan.RecordState) == 0 && !overLimit(pool, limit) {
		return nil
	}
	list := &appsv1.ControllerRevisionList{}
	// A rollout that starts reads the history uncached: a record written a
	// moment ago (a reconcile that crashed before starting the rollout, or
	// one that ran on a stale MachineDeployment) must be seen to be
	// recognised.
	var reader client.Reader = r.Client
	if plan.Record != nil && r.APIReader != nil {
		reader = r.APIReader
	}
	if err := reader.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return fmt.Errorf("listing the pool's history: %w", err)
	}
	owned := adoptInterrupted(pool, list.Items, plan)
	defer func() { pool.Status.Revisions = history.References(owned) }()
	finish := func(outcome string, at time.Time) error {
		for i := range owned {
			cr := &owned[i]
			if cr.Annotations[history.AnnotationOutcome] != history.OutcomeInProgress {
				continue
			}
			before := cr.DeepCopy()
			cr.Annotations[history.AnnotationOutcome] = outcome
			cr.Annotations[history.AnnotationCompleted] = history.Completed(at)
			if err := r.Client.Patch(ctx, cr, client.MergeFrom(before)); err != nil {
				return fmt.Errorf("recording the outcome of revision %d: %w", cr.Revision, err)
			}
			e, _ := history.Decode(cr)
			took := time.Duration(0) // a superseded rollout has no duration
			if outcome == history.OutcomeComplete {
				took = at.Sub(e.Started)
			}
			observeRolloutCompleted(pool, e.Initiator, outcome, took)
		}
		return nil
	}
	if plan.Record != nil {
		if last := lastRollout(owned); last != nil && sameRollout(last, plan.Record) {
			// Recorded already, by a reconcile that did not get to start it.
			return r.writeRecordState(ctx, pool, last, plan.RecordState) // record_state.go
		}
	}
	if plan.Finish != "" {
		if err := finish(string(plan.Finish), plan.FinishedAt); err != nil {
			return err
		}
	}
	if plan.Record == nil {
		if err := r.writeRecordState(ctx, pool, lastRollout(owned), plan.RecordState); err != nil {
			return err
		}
		return r.prune(ctx, &owned, limit)
	}
	// Numbers go on from the highest any revision of the pool's label
	// claims, so a revision someone else made never takes a record's name.
	next := int64(1)
	for _, cr := range list.Items {
		next = max(next, cr.Revision+1)
	}
	e := history.Entry{
		Revision: next, Initiator: string(plan.Record.Initiator), RolloutHash: plan.Record.RolloutHash,
		PayloadHash: plan.Record.PayloadHash, Changed: plan.Record.Changed, Started: plan.Record.Started,
		ForcedAt: plan.Record.ForcedAt, Reason: plan.Record.Reason, Spec: pool.Spec,
		Machines: plan.Record.Machines, Rounds: plan.Record.Rounds,
	}
	if plan.Record.Soak > 0 {
		e.Soak = &metav1.Duration{Duration: plan.Record.Soak}
	}
	rollbackEntry(&e, owned, plan.Record) // readinessgate_history.go
	if in != nil && plan.Record.RollbackOf == "" {
		for _, s := range in.Sources {
			e.Sources = append(e.Sources, history.Source{Kind: s.Kind, Name: s.Name, Digest: s.Digest})
		}
	}
	var cr *appsv1.ControllerRevision
	for attempt := 0; ; attempt++ {
		var err error
		if cr, err = history.New(pool.Namespace, pool.Name, e); err != nil {
			return err
		}
		for k, v := range plan.RecordState { // a new rollout's record starts with what the plan keeps on it
			if v != "" {
				cr.Annotations[k] = v
			}
		}
		if err := controllerutil.SetControllerReference(pool, cr, r.Client.Scheme()); err != nil {
			return err
		}
		err = r.Client.Create(ctx, cr)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || attempt == 5 {
			return fmt.Errorf("recording revision %d: %w", e.Revision, err)
		}
		e.Revision++ // the name is taken by an object without the pool's label
	}
	observeRolloutStarted(pool, e.Initiator)
	r.written.record(pool, cr)
	owned = append(owned, *cr)
	return r.prune(ctx, &owned, limit)
}

// prune deletes the oldest finished records beyond limit (never a rollout
// in progress) and drops them from owned.
func (r *Reconciler) prune(ctx context.Context, owned *[]appsv1.ControllerRevision, limit int) error {
	gone := map[int64]bool{}
	for _, cr := range history.Prunable(*owned, limit) {
		if err := r.Client.Delete(ctx, &cr); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("pruning revision %d: %w", cr.Revision, err)
		}
		gone[cr.Revision] = true
	}
	*owned = slices.DeleteFunc(*owned, func(cr appsv1.ControllerRevision) bool { return gone[cr.Revision] })
	return nil
}

// overLimit reports, from status.revisions alone (no read), whether the
// pool may hold more records than its limit: more than the limit and one
// in progress, or more than the limit while no rollout is under way.
func overLimit(pool *nodepoolv1.NodePool, limit int) bool {
	limit = max(limit, 1) // the current rollout's record is kept (history.Prunable)
	n := len(pool.Status.Revisions)
	return n > limit+1 || (n > limit && pool.Status.Updating == "")
}

// lastRollout is the newest of owned that records a rollout of the
// controller's (not an external change, which is finished when written),
// nil when there is none.
func lastRollout(owned []appsv1.ControllerRevision) *appsv1.ControllerRevision {
	for i := len(owned) - 1; i >= 0; i-- {
		if !history.IsExternalOutcome(owned[i].Annotations[history.AnnotationOutcome]) {
			return &owned[i]
		}
	}
	return nil
}

// sameRollout reports whether a revision in progress records the rollout
// rec describes: same initiator, rollout hash and forced time.
func sameRollout(cr *appsv1.ControllerRevision, rec *rollout.Record) bool {
	if cr.Annotations[history.AnnotationOutcome] != history.OutcomeInProgress {
		return false
	}
	e, err := history.Decode(cr)
	if err != nil {
		return false
	}
	if e.Initiator != string(rec.Initiator) || e.RolloutHash != rec.RolloutHash {
		return false
	}
	if (e.ForcedAt == nil) != (rec.ForcedAt == nil) {
		return false
	}
	return e.ForcedAt == nil || e.ForcedAt.Equal(*rec.ForcedAt)
}

// adoptInterrupted returns the pool's records (history.Records) and, after
// them, a record a crash kept off status.revisions: the next number, still
// in progress, for the rollout the engine records now or the one the
// machines are moving to. Anything else the pool's label and owner
// reference claim is ignored.
func adoptInterrupted(pool *nodepoolv1.NodePool, crs []appsv1.ControllerRevision, plan rollout.Plan) []appsv1.ControllerRevision {
	owned := history.Records(pool, crs)
	last := int64(0)
	if n := len(owned); n > 0 {
		last = owned[n-1].Revision
	}
	for _, cr := range history.Unlisted(pool, crs) {
		if cr.Revision != last+1 || cr.Annotations[history.AnnotationOutcome] != history.OutcomeInProgress {
			continue
		}
		e, err := history.Decode(&cr)
		if err != nil {
			continue
		}
		recording := plan.Record != nil && sameRollout(&cr, plan.Record)
		moving := plan.Decision.Target != nil && e.RolloutHash == plan.Decision.Target.RolloutHash
		if recording || moving {
			owned = append(owned, cr)
			last = cr.Revision
		}
	}
	return owned
}
