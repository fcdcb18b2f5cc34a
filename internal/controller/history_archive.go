package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// The history archive (history.Archive): the pool's records copied into a
// Secret it controls, which clusterctl move carries where it carries no
// ControllerRevision. restoreHistory runs first in a reconcile, so the
// engine and the history phase see the records on a moved pool's first
// reconcile; archiveHistory runs last, once the cache shows the records
// status.revisions lists.

// poolRecords lists the pool's records from the cache.
func (r *Reconciler) poolRecords(ctx context.Context, pool *nodepoolv1.NodePool) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the pool's history: %w", err)
	}
	return history.Records(pool, list.Items), nil
}

// archiveOf reads the pool's archive Secret from the cache: nil when
// there is none, or when the pool does not control it (someone else's
// Secret of that name is never read as the pool's).
func (r *Reconciler) archiveOf(ctx context.Context, pool *nodepoolv1.NodePool) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: history.ArchiveName(pool.Name)}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history archive %s: %w", history.ArchiveName(pool.Name), err)
	}
	if !metav1.IsControlledBy(s, pool) {
		return nil, nil
	}
	return s, nil
}

// restoreHistory gives a pool that has been rolled out (it carries the
// rollout annotation) but has no record and lists none (a pool moved to
// this management cluster: a move carries neither ControllerRevisions nor
// status) its records back from its archive, under their names and
// numbers, and lists them in status.revisions. A new pool has no
// rollout annotation yet: nothing is restored into it.
func (r *Reconciler) restoreHistory(ctx context.Context, rc *poolReconcile) error {
	pool := rc.pool
	if _, rolled := pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig]; !rolled || len(pool.Status.Revisions) > 0 {
		return nil
	}
	if records, err := r.poolRecords(ctx, pool); err != nil || len(records) > 0 {
		return err
	}
	archive, err := r.archiveOf(ctx, pool)
	if err != nil || archive == nil {
		return err
	}
	crs, err := history.Unarchive(archive, pool.Name)
	if err != nil {
		r.log(pool).Info("not restoring the pool's history from its archive", "secret", archive.Name, "reason", err.Error())
		return nil
	}
	restored := make([]appsv1.ControllerRevision, 0, len(crs))
	for i := range crs {
		cr := &crs[i]
		if err := r.createOwned(ctx, pool, cr, "ControllerRevision"); err != nil {
			return fmt.Errorf("restoring revision %d from the history archive: %w", cr.Revision, err)
		}
		restored = append(restored, *cr)
	}
	pool.Status.Revisions = history.References(restored)
	r.log(pool).Info("restored the pool's history from its archive", "secret", archive.Name, "records", len(restored))
	return nil
}

// archiveHistory writes the archive when it differs from the pool's
// records, once the cache holds exactly the records status.revisions
// lists (right after a write it may not yet: the next reconcile archives).
func (r *Reconciler) archiveHistory(ctx context.Context, rc *poolReconcile) error {
	pool := rc.pool
	records, err := r.poolRecords(ctx, pool)
	if err != nil {
		return err
	}
	if len(records) == 0 || (len(pool.Status.Revisions) > 0 && !equality.Semantic.DeepEqual(history.References(records), pool.Status.Revisions)) {
		return nil
	}
	got, err := r.archiveOf(ctx, pool)
	if err != nil {
		return err
	}
	// Steady state: the records and the archive are the versions archived
	// last time; nothing to encode.
	key := archiveKey(records, got)
	if v, ok := r.archived.Load(pool.UID); ok && v == key {
		return nil
	}
	want, err := history.Archive(pool.Namespace, pool.Name, records)
	if err != nil {
		return err
	}
	if len(want.Data[history.KeyArchive]) > maxArchiveBytes {
		r.log(pool).Info("the history archive would not fit in a Secret: not written", "bytes", len(want.Data[history.KeyArchive]))
		return nil
	}
	if got == nil {
		switch err := r.createOwned(ctx, pool, want, "Secret"); {
		case err == nil, errors.Is(err, errNotCached):
		case isConflict(err):
			r.log(pool).Info("the history archive is not written", "reason", err.Error())
		default:
			return err
		}
		return nil
	}
	if history.SameArchive(got, want) {
		r.archived.Store(pool.UID, key)
		return nil
	}
	patched := got.DeepCopy()
	patched.Data = want.Data
	switch err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(got, client.MergeFromWithOptimisticLock{})); {
	case apierrors.IsConflict(err):
		// The cache has not yet seen the archive's newer version (most
		// often this controller's own last write). That version's event
		// reconciles the pool again, and that reconcile archives: no
		// error, no failed condition, no retry with backoff.
		logr.FromContextOrDiscard(ctx).V(1).Info("the history archive changed since it was cached; the next reconcile archives", "secret", got.Name)
	case err != nil:
		return fmt.Errorf("writing the history archive %s: %w", got.Name, err)
	}
	return nil
}

// archiveKey names the versions of the records and of the archive.
func archiveKey(records []appsv1.ControllerRevision, archive *corev1.Secret) string {
	var b strings.Builder
	for _, cr := range records {
		b.WriteString(cr.Name + "@" + cr.ResourceVersion + ",")
	}
	if archive != nil {
		b.WriteString(archive.ResourceVersion)
	}
	return b.String()
}

// maxArchiveBytes keeps the archive well inside a Secret's 1 MiB.
const maxArchiveBytes = 900 << 10
