package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// expectationTimeout is how long the fleet rollout controller waits for
// the cache to show a per-pool state it wrote before deciding without it
// (someone changed the annotation since, or the pool is gone).
const expectationTimeout = 30 * time.Second

// expectations are the per-pool states a fleet rollout wrote and the cache
// has not shown yet: a decision made before the cache caught up would
// count a pool it triggered as not triggered (and trigger more pools than
// maxConcurrent, or miss a pool it just selected). Kept in memory only: a
// restarted controller's cache is filled by a consistent list, which
// shows every write made before.
type expectations struct {
	mu sync.Mutex
	m  map[string]map[fleet.Ref]expected
}

type expected struct {
	value string
	at    time.Time
}

func (e *expectations) wrote(name string, ref fleet.Ref, value string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]map[fleet.Ref]expected{}
	}
	if e.m[name] == nil {
		e.m[name] = map[fleet.Ref]expected{}
	}
	e.m[name][ref] = expected{value: value, at: now}
}

func (e *expectations) forget(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, name)
}

// waiting reports whether a state written for the rollout name is not in
// the cache yet (cached returns a pool's annotation there), dropping the
// ones seen or timed out.
func (e *expectations) waiting(name string, now time.Time, cached func(fleet.Ref) (string, bool)) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	wait := false
	for ref, x := range e.m[name] {
		if v, ok := cached(ref); ok && v == x.value || now.Sub(x.at) > expectationTimeout || now.Before(x.at) {
			delete(e.m[name], ref)
			continue
		}
		wait = true
	}
	return wait
}

// records keeps, per pool, the history record of a fleet rollout's
// trigger found at the last reconcile, with the version of the pool's
// history it was read at: a pool's history record event (the watch's
// map function, called once the cache holds the change) moves the
// version on, and the next reconcile reads that pool's records again.
// The other members under way are not read again: a reconcile reads the
// history of the pools whose history changed, not of every pool rolling.
type records struct {
	mu       sync.Mutex
	versions map[fleet.Ref]uint64
	kept     map[fleet.Ref]keptRecord
}

type keptRecord struct {
	uid     types.UID
	at      time.Time
	version uint64
	rec     *fleet.Record
}

// changed moves the pool's history version on.
func (r *records) changed(ref fleet.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.versions == nil {
		r.versions = map[fleet.Ref]uint64{}
	}
	r.versions[ref]++
}

// get is the record kept for the pool (uid) and trigger time at the
// pool's current history version; else false, and the version to keep
// the record read now at (read before the list, so an event during it
// makes the next reconcile read again).
func (r *records) get(ref fleet.Ref, uid types.UID, at time.Time) (*fleet.Record, bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.versions[ref]
	k, ok := r.kept[ref]
	if ok && k.uid == uid && k.at.Equal(at) && k.version == v {
		return k.rec, true, v
	}
	return nil, false, v
}

func (r *records) keep(ref fleet.Ref, uid types.UID, at time.Time, version uint64, rec *fleet.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kept == nil {
		r.kept = map[fleet.Ref]keptRecord{}
	}
	r.kept[ref] = keptRecord{uid: uid, at: at, version: version, rec: rec}
}

// states keeps, per fleet rollout, each member's kept state decoded with
// the annotation it was decoded from: a reconcile decodes only the
// members whose annotation changed since the last one (a few), not every
// member's JSON again.
type states struct {
	mu sync.Mutex
	m  map[string]*keptStates
}

// keptStates are one fleet rollout's members decoded; a reconcile uses
// them alone (the controller reconciles one rollout at a time).
type keptStates struct {
	byRef map[fleet.Ref]*decodedState
	// gen counts the reconciles: a member not read at the current one
	// (no longer a member, deleted) is dropped by sweep.
	gen uint64
}

type decodedState struct {
	value  string
	member nodepoolv1.FleetRolloutPool
	err    error
	gen    uint64
}

// of is the fleet rollout name's decoded members, for one reconcile.
func (s *states) of(name string) *keptStates {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*keptStates{}
	}
	k := s.m[name]
	if k == nil {
		k = &keptStates{byRef: map[fleet.Ref]*decodedState{}}
		s.m[name] = k
	}
	k.gen++
	return k
}

func (s *states) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

// decode is fleet.Decode of the pool's annotation value, from the last
// reconcile when the value is the same: ok is false when it cannot be
// read (err says why), as fleet.MemberOf. The member returned shares its
// TriggeredAt with the one kept: read it, never change it through it
// (fleet.Decide works on copies).
func (k *keptStates) decode(ref fleet.Ref, value string) (nodepoolv1.FleetRolloutPool, bool, error) {
	d, ok := k.byRef[ref]
	if !ok {
		d = &decodedState{}
		k.byRef[ref] = d
	}
	if !ok || d.value != value {
		d.value = value
		d.member, d.err = fleet.Decode(ref.Namespace, ref.Name, value)
	}
	d.gen = k.gen
	if d.err != nil {
		return nodepoolv1.FleetRolloutPool{}, false, d.err
	}
	return d.member, true, nil
}

// sweep drops the members not read at this reconcile.
func (k *keptStates) sweep() {
	for ref, d := range k.byRef {
		if d.gen != k.gen {
			delete(k.byRef, ref)
		}
	}
}
