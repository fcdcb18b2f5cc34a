package sim

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Ignition's retry delays for an HTTP fetch: it starts at 200ms and doubles
// up to 5s, for as long as the server answers 5xx or cannot be reached.
const (
	DefaultInitialRetryDelay = 200 * time.Millisecond
	DefaultMaxRetryDelay     = 5 * time.Second
)

// backoff counts the failed payload fetches of each machine and says when
// to try again. It is in memory: the requeue, not a sleeping worker, waits.
type backoff struct {
	initial, max time.Duration

	mu       sync.Mutex
	attempts map[types.UID]int
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, attempts: map[types.UID]int{}}
}

// next records a failed attempt and returns the delay before the next one
// and the number of attempts so far.
func (b *backoff) next(uid types.UID) (time.Duration, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.attempts[uid]
	b.attempts[uid] = n + 1
	d := b.initial
	for i := 0; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max), n + 1
}

// forget drops a machine's count, once it booted, failed for good or is gone.
func (b *backoff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.attempts, uid)
}
