package history

import (
	appsv1 "k8s.io/api/apps/v1"

	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// RecentLimit is how many of a pool's latest finished rollouts predict how
// long the next one takes.
const RecentLimit = 10

// Rollouts returns the newest finished rollouts among the revisions (at
// most limit, newest first), as the duration prediction reads them
// (poolmath.Predict): completed, superseded and failed ones, each with its
// duration to its outcome and its machines, rounds and soaks. The pool's
// creation (revision 1) is left out: it boots machines, it replaces none;
// so are rollouts in progress and unreadable records.
func Rollouts(crs []appsv1.ControllerRevision, limit int) []poolmath.PastRollout {
	sorted := append([]appsv1.ControllerRevision(nil), crs...)
	Sort(sorted)
	var out []poolmath.PastRollout
	for i := len(sorted) - 1; i >= 0 && len(out) < limit; i-- {
		e, err := Decode(&sorted[i])
		if err != nil {
			continue
		}
		if r, ok := Past(e); ok {
			out = append(out, r)
		}
	}
	return out
}

// Past is what a finished rollout's record says for the duration
// prediction; false for the creation, a rollout in progress and one
// without a positive duration. A record without machines and rounds
// (written before they were kept) has them from its spec: every machine
// of its replicas (an autoscaled pool's minimum), in the rounds and soaks
// the spec declares.
func Past(e Entry) (poolmath.PastRollout, bool) {
	if e.Revision <= 1 || e.Completed == nil {
		return poolmath.PastRollout{}, false
	}
	r := poolmath.PastRollout{Took: e.Completed.Sub(e.Started)}
	switch e.Outcome {
	case OutcomeComplete:
		r.Complete = true
	case OutcomeFailed:
		r.Failed = true
	case OutcomeSuperseded:
	default:
		return poolmath.PastRollout{}, false
	}
	if r.Took <= 0 {
		return poolmath.PastRollout{}, false
	}
	r.Shape = poolmath.Shape{Machines: e.Machines, Rounds: e.Rounds}
	if e.Soak != nil {
		r.Shape.Soak = e.Soak.Duration
	}
	if e.Rounds == 0 {
		desired := poolmath.DesiredReplicas(&e.Spec, nil)
		r.Shape, _ = poolmath.ShapeOf(&e.Spec, desired, desired)
	}
	return r, true
}
