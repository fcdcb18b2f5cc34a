package controller

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
)

// A reconcile decides on what the controller's cache shows, and the cache
// is fed by one informer per kind, each delivering its events on its own:
// a reconcile can read the controller's own write to a pool's
// MachineDeployment and not yet its write, a moment earlier or later, to
// the pool's record or user-data. Deciding on those would undo what the
// controller just did: a forced rollout rewrites the user-data (the
// payload its rollout now started with) after its token and its
// MachineDeployment, and the look after it, reading the user-data as it
// was, pointed the token back at the payload the old machines run, so a
// machine Cluster API made then booted it.
//
// So the controller remembers the version of each object it wrote that
// carries a rollout's state (the pool's current record, its token and
// user-data Secrets, its MachineDeployment or InPlace MachineSet), and a
// reconcile whose cache shows an older one, or none yet, decides nothing
// and looks again shortly (errStaleCache).

// errStaleCache stops a reconcile whose cache holds an older version of an
// object the controller wrote than the one it wrote (or not yet the
// object).
var errStaleCache = errors.New("the cache holds an older version of an object the controller wrote")

// staleCacheRetry is when a reconcile stopped by errStaleCache looks again
// (the pool is not woken by every such object's event).
const staleCacheRetry = time.Second

// staleCacheLimit bounds how long a write is waited for: a cache that has
// not shown it by then never will (a person deleted the object, or wrote
// it since), and the pool is decided on what exists.
const staleCacheLimit = 30 * time.Second

// writtenRecord is the version of a pool's current record the controller
// last wrote, and when.
type writtenRecord struct {
	revision        int64
	resourceVersion string
	at              time.Time
}

// writtenObject is the version of an object the controller last wrote,
// and when.
type writtenObject struct {
	resourceVersion string
	at              time.Time
}

// ownedKey names one of a pool's objects: its kind and name.
type ownedKey struct{ kind, name string }

// keyOf is the ownedKey of one of the pool's Secrets, its
// MachineDeployment or its MachineSet.
func keyOf(obj client.Object) ownedKey {
	switch obj.(type) {
	case *corev1.Secret:
		return ownedKey{"Secret", obj.GetName()}
	case *clusterv1.MachineDeployment:
		return ownedKey{"MachineDeployment", obj.GetName()}
	case *clusterv1.MachineSet:
		return ownedKey{"MachineSet", obj.GetName()}
	}
	return ownedKey{fmt.Sprintf("%T", obj), obj.GetName()}
}

// ownWrites remembers, by pool UID, the record and the other objects the
// controller last wrote. Safe for concurrent use.
type ownWrites struct {
	mu      sync.Mutex
	records map[types.UID]writtenRecord
	objects map[types.UID]map[ownedKey]writtenObject
}

// record remembers the version of the pool's current record written.
func (v *ownWrites) record(pool *nodepoolv1.NodePool, cr *appsv1.ControllerRevision) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.records == nil {
		v.records = map[types.UID]writtenRecord{}
	}
	v.records[pool.UID] = writtenRecord{revision: cr.Revision, resourceVersion: cr.ResourceVersion, at: time.Now()}
}

// object remembers the version of one of the pool's objects written (a
// Secret, its MachineDeployment or MachineSet).
func (v *ownWrites) object(pool *nodepoolv1.NodePool, obj client.Object) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.objects == nil {
		v.objects = map[types.UID]map[ownedKey]writtenObject{}
	}
	if v.objects[pool.UID] == nil {
		v.objects[pool.UID] = map[ownedKey]writtenObject{}
	}
	v.objects[pool.UID][keyOf(obj)] = writtenObject{resourceVersion: obj.GetResourceVersion(), at: time.Now()}
}

// deleted forgets an object of the pool the controller deleted.
func (v *ownWrites) deleted(pool *nodepoolv1.NodePool, obj client.Object) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.objects[pool.UID], keyOf(obj))
}

// forget drops what is remembered of a pool (deleted).
func (v *ownWrites) forget(pool *nodepoolv1.NodePool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.records, pool.UID)
	delete(v.objects, pool.UID)
}

// check fails with errStaleCache when the cache's current record (among
// records), or one of the pool's other objects (cached: nil when the
// cache has none), is older than the one last written, or not there; what
// the cache has caught up with, and what was waited for past
// staleCacheLimit, is forgotten.
func (v *ownWrites) check(pool *nodepoolv1.NodePool, records []appsv1.ControllerRevision, cached func(ownedKey) client.Object) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	stale := false
	if w, ok := v.records[pool.UID]; ok {
		cur := history.Current(records)
		switch {
		case time.Since(w.at) > staleCacheLimit:
			delete(v.records, pool.UID)
		case cur == nil || cur.Revision < w.revision,
			cur.Revision == w.revision && olderVersion(cur.ResourceVersion, w.resourceVersion):
			stale = true
		default:
			delete(v.records, pool.UID)
		}
	}
	for key, w := range v.objects[pool.UID] {
		obj := cached(key)
		switch {
		case time.Since(w.at) > staleCacheLimit:
			delete(v.objects[pool.UID], key)
		case obj == nil || olderVersion(obj.GetResourceVersion(), w.resourceVersion):
			stale = true
		default:
			delete(v.objects[pool.UID], key)
		}
	}
	if len(v.objects[pool.UID]) == 0 {
		delete(v.objects, pool.UID)
	}
	if stale {
		staleDecisions.Inc()
		return errStaleCache
	}
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
