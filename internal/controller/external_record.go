package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// recordExternal writes each external change (external.go) to the pool's
// history, finished (outcome Reverted: the apply that follows writes the
// controller's values back), once: a change already on record (same
// manager, fields and time: a reconcile whose apply failed) is not
// recorded again. Each is said in a Warning event and kept for
// status.rollout.external.
func (r *Reconciler) recordExternal(ctx context.Context, rc *poolReconcile) error {
	if len(rc.w.externalOf()) == 0 {
		return nil
	}
	pool := rc.pool
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader // a record written a moment ago must be seen
	}
	list := &appsv1.ControllerRevisionList{}
	if err := reader.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return fmt.Errorf("listing the pool's history: %w", err)
	}
	owned := history.Records(pool, list.Items)
	next := int64(1)
	for _, cr := range list.Items {
		next = max(next, cr.Revision+1)
	}
	for _, x := range rc.w.external {
		rev, done := recordedAlready(owned, x)
		if !done {
			cr, err := r.createExternalRecord(ctx, pool, x, next)
			if err != nil {
				return err
			}
			owned = append(owned, *cr)
			rev, next = cr.Revision, cr.Revision+1
			observeExternalChange(pool)
			reason := nodepoolv1.EventExternalChangeReverted
			if x.kept != "" {
				reason = nodepoolv1.EventExternalChangeRecorded
			}
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", x.describe(rev, pool))
		}
		rc.external = append(rc.external, nodepoolv1.ExternalChange{Revision: rev, Manager: x.manager, At: &metav1.Time{Time: x.at},
			Fields: x.fields, Message: x.describe(rev, pool)})
	}
	if err := r.prune(ctx, &owned, history.Limit(pool, r.Settings.HistoryLimit)); err != nil {
		return err
	}
	pool.Status.Revisions = history.References(owned)
	return nil
}

// createExternalRecord writes x's record under the first free number from
// next.
func (r *Reconciler) createExternalRecord(ctx context.Context, pool *nodepoolv1.NodePool, x *externalChange, next int64) (*appsv1.ControllerRevision, error) {
	e := history.Entry{Revision: next, Initiator: history.InitiatorExternal, Manager: x.manager, Fields: x.fields,
		Started: x.at, Spec: pool.Spec}
	for attempt := 0; ; attempt++ {
		cr, err := history.New(pool.Namespace, pool.Name, e)
		if err != nil {
			return nil, err
		}
		cr.Annotations[history.AnnotationOutcome] = history.OutcomeReverted
		if x.kept != "" {
			cr.Annotations[history.AnnotationOutcome] = history.OutcomeRecorded
		}
		cr.Annotations[history.AnnotationCompleted] = history.Completed(r.now())
		if err := controllerutil.SetControllerReference(pool, cr, r.Client.Scheme()); err != nil {
			return nil, err
		}
		err = r.Client.Create(ctx, cr)
		if err == nil {
			return cr, nil
		}
		if !apierrors.IsAlreadyExists(err) || attempt == 5 {
			return nil, fmt.Errorf("recording the external change as revision %d: %w", e.Revision, err)
		}
		e.Revision++ // the name is taken by an object without the pool's label
	}
}

// recordedAlready finds the newest external record and reports whether it
// is x's.
func recordedAlready(owned []appsv1.ControllerRevision, x *externalChange) (int64, bool) {
	for i := len(owned) - 1; i >= 0; i-- {
		e, err := history.Decode(&owned[i])
		if err != nil || e.Initiator != history.InitiatorExternal {
			continue
		}
		same := e.Manager == x.manager && e.Started.Equal(x.at.Truncate(time.Second)) && slices.Equal(e.Fields, x.fields)
		return e.Revision, same
	}
	return 0, false
}

// externalStanding is status.rollout.external: the newest change this
// reconcile found, else the one the pool said before, while its record is
// in the history. The current rollout (status.rollout.revision) is never
// an external record.
func externalStanding(rc *poolReconcile, st *nodepoolv1.NodePoolStatus) {
	if st.Rollout == nil {
		return
	}
	var ext *nodepoolv1.ExternalChange
	if n := len(rc.external); n > 0 {
		ext = &rc.external[n-1]
	} else if was := rc.before.Status.Rollout; was != nil && was.External != nil {
		ext = was.External
	}
	if ext == nil || !slices.ContainsFunc(st.Revisions, func(r nodepoolv1.RevisionReference) bool { return r.Revision == ext.Revision }) {
		return
	}
	st.Rollout.External = ext
	if st.Rollout.Revision == ext.Revision {
		var refs []nodepoolv1.RevisionReference
		for _, r := range st.Revisions {
			if r.Revision != ext.Revision {
				refs = append(refs, r)
			}
		}
		st.Rollout.Revision = history.Newest(refs)
	}
}

// externalOf is the external changes found, none without a world.
func (w *world) externalOf() externalChanges {
	if w == nil {
		return nil
	}
	return w.external
}
