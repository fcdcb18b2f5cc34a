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
