package sim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestBackoffDoublesUpToTheMaximumLikeIgnition(t *testing.T) {
	b := newBackoff(DefaultInitialRetryDelay, DefaultMaxRetryDelay)
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		d, n := b.next("m1")
		if d != w || n != i+1 {
			t.Fatalf("attempt %d: delay %s (attempt %d), want %s", i+1, d, n, w)
		}
	}
	if d, _ := b.next(types.UID("m2")); d != 200*time.Millisecond {
		t.Fatalf("another machine starts at %s, want 200ms", d)
	}
	b.forget("m1")
	if d, n := b.next("m1"); d != 200*time.Millisecond || n != 1 {
		t.Fatalf("after forget: %s (attempt %d), want 200ms (attempt 1)", d, n)
	}
	for range 100 {
		b.next("m3")
	}
	if d, _ := b.next("m3"); d != 5*time.Second {
		t.Fatalf("after many attempts: %s, want 5s", d)
	}
}
