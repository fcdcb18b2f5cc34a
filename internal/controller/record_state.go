package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// What the engine keeps about the current rollout (its halt, a drain
// halt, a forced rollout's payloads, a rollback: rollout.RecordKeys) is
// written on the rollout's record, the pool's newest ControllerRevision,
// as annotations; the controller remembers the version it wrote
// (own_writes.go), so the engine never decides on a halt it has forgotten.

// writeRecordState writes state (a value sets an annotation, "" removes
// it) on cr, the pool's current record.
func (r *Reconciler) writeRecordState(ctx context.Context, pool *nodepoolv1.NodePool, cr *appsv1.ControllerRevision, state map[string]string) error {
	if cr == nil || len(state) == 0 {
		return nil
	}
	before := cr.DeepCopy()
	changed := false
	for k, v := range state {
		was, had := cr.Annotations[k]
		switch {
		case v == "" && had:
			delete(cr.Annotations, k)
		case v != "" && was != v:
			if cr.Annotations == nil {
				cr.Annotations = map[string]string{}
			}
			cr.Annotations[k] = v
		default:
			continue
		}
		changed = true
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, cr, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("recording the state of revision %d: %w", cr.Revision, err)
	}
	r.written.record(pool, cr)
	return nil
}
