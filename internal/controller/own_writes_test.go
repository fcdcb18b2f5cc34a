package controller

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// A reconcile never decides on a record older than the one the controller
// wrote: a cache that shows an older version, or not yet the new record,
// stops it (errStaleCache) until it has caught up; a record that never
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
		var v ownWrites
		v.record(pool, &written)
		err := v.check(pool, tc.records, noSecrets)
		if got := errors.Is(err, errStaleCache); got != tc.stale {
			t.Errorf("%s: %v, want stale %v", tc.name, err, tc.stale)
		}
		if !tc.stale && v.check(pool, []appsv1.ControllerRevision{rec(3, "100")}, noSecrets) != nil {
			t.Errorf("%s: still remembered once the cache caught up", tc.name)
		}
	}
	var v ownWrites
	v.record(pool, &written)
	w := v.records[pool.UID]
	w.at = time.Now().Add(-staleCacheLimit - time.Second)
	v.records[pool.UID] = w
	if err := v.check(pool, nil, noSecrets); err != nil {
		t.Errorf("a record never shown is waited for past the limit: %v", err)
	}
}

func noSecrets(ownedKey) client.Object { return nil }

// A reconcile never decides on a token or user-data Secret, or a
// MachineDeployment, older than the one the controller wrote (a forced
// rollout's user-data, rewritten after its MachineDeployment): a cache
// that shows an older version, or not yet the object it created, stops it
// until it has caught up; a Secret the controller deleted is not waited
// for, nor one that never shows.
func TestAReconcileWaitsForTheObjectsTheControllerWrote(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	secret := func(name, rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	cache := func(objs ...client.Object) func(ownedKey) client.Object {
		return func(key ownedKey) client.Object {
			for _, o := range objs {
				if keyOf(o) == key {
					return o
				}
			}
			return nil
		}
	}
	md := func(rv string) *clusterv1.MachineDeployment {
		return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "workers", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name   string
		cached func(ownedKey) client.Object
		stale  bool
	}{
		{"the cache has not seen the new Secret", cache(secret("workers-token-a", "90")), true},
		{"the cache has an older version of it", cache(secret("workers-token-a", "90"), secret("workers-userdata-a", "110")), true},
		{"the cache has caught up", cache(secret("workers-token-a", "90"), secret("workers-userdata-a", "120"), md("140")), false},
		{"the cache is past it", cache(secret("workers-userdata-a", "130"), md("140")), false},
		{"a Secret of its name is not the MachineDeployment", cache(secret("workers", "200"), secret("workers-userdata-a", "120")), true},
		{"the cache has an older MachineDeployment", cache(secret("workers-userdata-a", "120"), md("130")), true},
	} {
		var v ownWrites
		v.object(pool, secret("workers-userdata-a", "120"))
		v.object(pool, md("140"))
		err := v.check(pool, nil, tc.cached)
		if got := errors.Is(err, errStaleCache); got != tc.stale {
			t.Errorf("%s: %v, want stale %v", tc.name, err, tc.stale)
		}
		if !tc.stale && v.check(pool, nil, noSecrets) != nil {
			t.Errorf("%s: still remembered once the cache caught up", tc.name)
		}
	}

	var v ownWrites
	v.object(pool, secret("workers-userdata-a", "120"))
	v.deleted(pool, secret("workers-userdata-a", ""))
	if err := v.check(pool, nil, noSecrets); err != nil {
		t.Errorf("a Secret the controller deleted is waited for: %v", err)
	}
	v.object(pool, secret("workers-userdata-a", "120"))
	key := keyOf(secret("workers-userdata-a", ""))
	w := v.objects[pool.UID][key]
	w.at = time.Now().Add(-staleCacheLimit - time.Second)
	v.objects[pool.UID][key] = w
	if err := v.check(pool, nil, noSecrets); err != nil {
		t.Errorf("a Secret never shown is waited for past the limit: %v", err)
	}
	other := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}
	v.object(pool, secret("workers-userdata-a", "120"))
	if err := v.check(other, nil, noSecrets); err != nil {
		t.Errorf("another pool's write is waited for: %v", err)
	}
	v.forget(pool)
	if err := v.check(pool, nil, noSecrets); err != nil {
		t.Errorf("a deleted pool's writes are remembered: %v", err)
	}
}
