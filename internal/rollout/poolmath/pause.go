package poolmath

import (
	"fmt"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Pause is the state of spec.management.pausedUntil at some time.
type Pause struct {
	// Paused is true while rollouts wait.
	Paused bool
	// Until is when the pause ends; zero while Paused means until someone
	// lifts it (pausedUntil "true", or a value that is not a time).
	Until time.Time
	// Invalid is set when pausedUntil is neither a boolean nor an RFC3339
	// time: the pool is held as paused until the value is corrected.
	Invalid bool
	// Value is pausedUntil as written.
	Value string
}

// PauseAt reads pausedUntil at now. It fails closed: a value that is not
// a real RFC3339 time (the API refuses one, but an object stored before
// that rule, or restored from a backup, may carry it) holds the pool as
// paused until someone corrects it.
func PauseAt(pool *nodepoolv1.NodePool, now time.Time) Pause {
	v := pool.Spec.Management.PausedUntil
	p := Pause{Value: v}
	switch v {
	case "", "false":
		return p
	case "true":
		p.Paused = true
		return p
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		p.Paused, p.Invalid = true, true
		return p
	}
	if now.Before(t) {
		p.Paused, p.Until = true, t
	}
	return p
}

// Indefinite is true for a pause nobody set an end to.
func (p Pause) Indefinite() bool { return p.Paused && p.Until.IsZero() }

// Describe says how long the pause holds, for messages: " until <time>",
// " (pausedUntil: \"true\")", or why an invalid value holds the pool.
func (p Pause) Describe() string {
	switch {
	case p.Invalid:
		return " (" + p.InvalidText() + ")"
	case p.Until.IsZero():
		return ` (pausedUntil: "true")`
	}
	return " until " + p.Until.UTC().Format(time.RFC3339)
}

// InvalidText explains an invalid pausedUntil.
func (p Pause) InvalidText() string {
	return fmt.Sprintf("spec.management.pausedUntil %q is not an RFC3339 time, so the pool is held as paused", p.Value)
}
