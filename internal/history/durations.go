package history

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// RecentLimit is how many of a pool's latest completed rollouts predict
// whether the next one fits a maintenance window.
const RecentLimit = 10

// Durations returns how long the newest completed rollouts among the
// revisions took (at most limit, newest first). The pool's creation
// (revision 1) is left out: it boots machines, it replaces none.
func Durations(crs []appsv1.ControllerRevision, limit int) []time.Duration {
	sorted := append([]appsv1.ControllerRevision(nil), crs...)
	Sort(sorted)
	var out []time.Duration
	for i := len(sorted) - 1; i >= 0 && len(out) < limit; i-- {
		e, err := Decode(&sorted[i])
		if err != nil || e.Revision <= 1 || e.Outcome != OutcomeComplete || e.Completed == nil {
			continue
		}
		if d := e.Completed.Sub(e.Started); d > 0 {
			out = append(out, d)
		}
	}
	return out
}
