package poolmath

import "time"

// ForcedApplied reports whether a forced rollout requested at at is
// carried out: the MachineDeployment's spec.rollout.after (rolloutAfter)
// is at or after it.
func ForcedApplied(rolloutAfter *time.Time, at time.Time) bool {
	return rolloutAfter != nil && !rolloutAfter.Before(at)
}

// CreatedBefore counts the machines a forced rollout at t replaces, given
// the time Cluster API compares with spec.rollout.after for each machine
// (its MachineSet's creation time): those strictly before t.
func CreatedBefore(created []time.Time, t time.Time) int32 {
	var n int32
	for _, c := range created {
		if c.Before(t) {
			n++
		}
	}
	return n
}

// RequestTime is the time a forced-rollout request is compared at:
// Cluster API compares creation times at whole seconds.
func RequestTime(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// ForcedNow is the time a forced rollout "now" is written with (by
// `kubectl nodepool rollout restart` and apply-pending, and by a fleet
// rollout's trigger): the next whole second. Cluster API compares
// spec.rollout.after with MachineSet creation times, which have a
// resolution of a second, and keeps a MachineSet created in that very
// second; a second ahead is after every machine that exists now, so each
// of them is replaced.
func ForcedNow(now time.Time) time.Time { return now.UTC().Truncate(time.Second).Add(time.Second) }
