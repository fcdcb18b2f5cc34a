package controller

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// A reconcile never decides on a record older than the one the controller
// wrote: a cache that shows an older version, or not yet the new record,
// stops it (errStaleRecords) until it has caught up; a record that never
// shows (a person deleted it) is waited for only so long.
func TestAReconcileWaitsForTheRecordTheControllerWrote(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	rec := func(rev int64, rv string) appsv1.ControllerRevision {
		return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv,
			Annotations: map[string]string{history.AnnotationOutcome: history.OutcomeInProgress}}, Revision: rev}
	}
	written := rec(4, "120")
	for _, tc := range []struct {
		name    string
		records []appsv1.ControllerRevision
		stale   bool
	}{
		{"the cache has not seen the new record", []appsv1.ControllerRevision{rec(3, "100")}, true},
		{"the cache has an older version of it", []appsv1.ControllerRevision{rec(3, "100"), rec(4, "110")}, true},
		{"the cache has caught up", []appsv1.ControllerRevision{rec(3, "100"), rec(4, "120")}, false},
		{"the cache is past it", []appsv1.ControllerRevision{rec(3, "100"), rec(4, "130")}, false},
	} {
		var v recordVersions
		v.wrote(pool, &written)
		err := v.check(pool, tc.records)
		if got := errors.Is(err, errStaleRecords); got != tc.stale {
			t.Errorf("%s: %v, want stale %v", tc.name, err, tc.stale)
		}
		if !tc.stale && v.check(pool, []appsv1.ControllerRevision{rec(3, "100")}) != nil {
			t.Errorf("%s: still remembered once the cache caught up", tc.name)
		}
	}
	var v recordVersions
	v.wrote(pool, &written)
	w := v.written[pool.UID]
	w.at = time.Now().Add(-staleRecordsLimit - time.Second)
	v.written[pool.UID] = w
	if err := v.check(pool, nil); err != nil {
		t.Errorf("a record never shown is waited for past the limit: %v", err)
	}
}
