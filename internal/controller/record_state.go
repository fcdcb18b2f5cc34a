package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// What the engine keeps about the current rollout (its halt, a drain
// halt, a forced rollout's payloads, a rollback: rollout.RecordKeys) is
// written on the rollout's record, the pool's newest ControllerRevision,
// as annotations. The record is another object than the pool: a reconcile
// that read the pool fresh may read the record from a cache that has not
// seen the controller's last write to it. So the controller remembers the
// version of each pool's record it last wrote, and a reconcile whose cache
// shows an older one decides nothing and looks again shortly
// (errStaleRecords): the engine never decides on a halt it has forgotten.

// errStaleRecords stops a reconcile whose cache holds an older version of
// the pool's current record than the controller wrote.
var errStaleRecords = errors.New("the cached rollout record is older than the one the controller wrote")

// staleRecordsRetry is when a reconcile stopped by errStaleRecords looks
// again (records are cached, not watched for the pool).
const staleRecordsRetry = time.Second

// writtenRecord is the version of a pool's current record the controller
// last wrote, and when.
type writtenRecord struct {
	revision        int64
	resourceVersion string
	at              time.Time
}

// staleRecordsLimit bounds how long a written record is waited for: a
// cache that has not shown it by then never will (a person deleted the
// record), and the pool is decided on what exists.
const staleRecordsLimit = 30 * time.Second

// recordVersions remembers, by pool UID, the record the controller last
// wrote.
type recordVersions struct {
	mu      sync.Mutex
	written map[types.UID]writtenRecord
}

func (v *recordVersions) wrote(pool *nodepoolv1.NodePool, cr *appsv1.ControllerRevision) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.written == nil {
		v.written = map[types.UID]writtenRecord{}
	}
	v.written[pool.UID] = writtenRecord{revision: cr.Revision, resourceVersion: cr.ResourceVersion, at: time.Now()}
}

// check fails with errStaleRecords when the cache's current record
// (among records) is older than the one last written; once the cache has
// caught up the memory is dropped.
func (v *recordVersions) check(pool *nodepoolv1.NodePool, records []appsv1.ControllerRevision) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.written[pool.UID]
	if !ok {
		return nil
	}
	cur := history.Current(records)
	if time.Since(w.at) > staleRecordsLimit {
		delete(v.written, pool.UID)
		return nil
	}
	switch {
	case cur == nil || cur.Revision < w.revision:
		staleDecisions.Inc()
		return errStaleRecords
	case cur.Revision == w.revision && olderVersion(cur.ResourceVersion, w.resourceVersion):
		staleDecisions.Inc()
		return errStaleRecords
	}
	delete(v.written, pool.UID)
	return nil
}

// olderVersion reports whether resource version a is older than b. The
// API server's versions are etcd revisions, increasing integers; one that
// does not read as such is never taken for older.
func olderVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

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
	r.records.wrote(pool, cr)
	return nil
}
