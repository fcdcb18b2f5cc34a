package payloadserver

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// Defaults of FailureLimits.
const (
	// DefaultFailuresPerSecond and DefaultFailureBurst: a machine with a
	// stale token retries with backoff, a few times a minute; guessing
	// needs millions of attempts.
	DefaultFailuresPerSecond = 5
	DefaultFailureBurst      = 50
	// DefaultMaxFailureDelay caps how long one failed attempt is held.
	DefaultMaxFailureDelay = 5 * time.Second
	// DefaultFailureSources is how many sources are tracked at once; the
	// least recently seen is forgotten first.
	DefaultFailureSources = 10000
)

// FailureLimits configure a FailureLimiter. Zero values take the defaults.
type FailureLimits struct {
	// PerSecond and Burst are the rate of failed attempts one source (remote
	// IP) may make before its failures are slowed down.
	PerSecond float64
	Burst     int
	// MaxDelay caps the delay of one failed attempt.
	MaxDelay time.Duration
	// Sources bounds the sources tracked (an LRU).
	Sources int
}

func (l FailureLimits) withDefaults() FailureLimits {
	if l.PerSecond <= 0 {
		l.PerSecond = DefaultFailuresPerSecond
	}
	if l.Burst <= 0 {
		l.Burst = DefaultFailureBurst
	}
	if l.MaxDelay <= 0 {
		l.MaxDelay = DefaultMaxFailureDelay
	}
	if l.Sources <= 0 {
		l.Sources = DefaultFailureSources
	}
	return l
}

// FailureLimiter slows down sources that fail to present a valid token: past
// its rate, each failed attempt of a source is answered only after a delay
// (the answer itself is the same 511 as any failure). A request with a valid
// token never reaches it, so machines behind the same address as a guesser
// are not slowed. Safe for concurrent use.
type FailureLimiter struct {
	limits FailureLimits
	mu     sync.Mutex
	// sources maps a remote IP to its *rate.Limiter; bounded, so a flood of
	// addresses costs at most Sources limiters.
	sources *lru.Cache
	// sleep waits d or until done is closed (tests replace it).
	sleep func(d time.Duration, done <-chan struct{})
}

// NewFailureLimiter returns a limiter with limits.
func NewFailureLimiter(limits FailureLimits) *FailureLimiter {
	limits = limits.withDefaults()
	return &FailureLimiter{limits: limits, sources: lru.New(limits.Sources), sleep: sleepOrDone}
}

func sleepOrDone(d time.Duration, done <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// delay returns how long the failed attempt of source must wait, and
// counts it.
func (l *FailureLimiter) delay(source string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lim *rate.Limiter
	if v, ok := l.sources.Get(source); ok {
		lim = v.(*rate.Limiter)
	} else {
		lim = rate.NewLimiter(rate.Limit(l.limits.PerSecond), l.limits.Burst)
		l.sources.Add(source, lim)
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > l.limits.MaxDelay {
		// The source is further behind than one delay: hold it the
		// maximum, without taking the slot (it keeps being held).
		r.CancelAt(now)
		d = l.limits.MaxDelay
	}
	return d
}

// Failed holds a failed attempt of r's source as long as its rate requires
// (or until the client goes away), and says whether it was held.
func (l *FailureLimiter) Failed(r *http.Request) bool {
	d := l.delay(sourceOf(r), time.Now())
	if d <= 0 {
		return false
	}
	l.sleep(d, r.Context().Done())
	return true
}

// sourceOf is the remote IP of r (the whole address if it has no port).
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
