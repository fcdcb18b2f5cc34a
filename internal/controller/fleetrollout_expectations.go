package controller

import (
	"sync"
	"time"

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
