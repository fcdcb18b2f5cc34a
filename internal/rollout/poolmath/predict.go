package poolmath

import (
	"fmt"
	"slices"
	"strings"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// MinPredictionSamples is how many of the pool's rollouts must have
// usable data (machines, rounds and a duration) before their time per
// round is trusted; with fewer the prediction uses the declared settings
// only.
const MinPredictionSamples = 3

// DefaultRoundDuration is the time per round assumed when the history is
// too short: the health gate's default progressDeadline (15m), the longest
// the gate lets a new machine take to turn healthy. A cloud machine's boot
// (3–10 minutes) and an old machine's drain fit in it, so it errs long.
var DefaultRoundDuration = DefaultProgressDeadline

// Shape is what a rollout does: how many machines it replaces (or updates
// in place), in how many rounds of at most maxSurge+maxUnavailable
// machines, and the soaks its health gate declares (canary rounds ×
// canarySoak + later rounds × soak, MinRolloutDuration).
type Shape struct {
	Machines, Rounds int32
	Soak             time.Duration
}

// ShapeOf is the shape of a rollout of machines of a pool of desired
// machines with spec: its rounds from the resolved maxSurge and
// maxUnavailable (InPlace: maxUnavailable nodes at a time), its canary
// and soaks. False when nothing can be predicted: an OnDelete pool (a
// person replaces its machines), unreadable limits, no machines.
func ShapeOf(spec *nodepoolv1.NodePoolSpec, desired, machines int32) (Shape, bool) {
	if machines <= 0 {
		return Shape{}, false
	}
	var surge, unavailable int32
	m := &spec.Management
	if m.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		unavailable = InPlaceMaxUnavailable(m.InPlace.MaxUnavailable, desired)
	} else {
		if m.Replace.Strategy != "" && m.Replace.Strategy != nodepoolv1.ReplaceStrategyRollingUpdate {
			return Shape{}, false
		}
		var err error
		if surge, unavailable, err = Fenceposts(m.Replace.RollingUpdate.MaxSurge, m.Replace.RollingUpdate.MaxUnavailable, desired); err != nil {
			return Shape{}, false
		}
	}
	s := Shape{Machines: machines}
	if h := Health(m.Health, desired); h != nil {
		c, l, soak := MinRolloutDuration(*h, machines, surge, unavailable)
		s.Rounds, s.Soak = c+l, soak
	} else {
		s.Rounds = Steps(machines, surge, unavailable)
	}
	return s, s.Rounds > 0
}

// PastRollout is one of the pool's finished rollouts, as its history
// record says.
type PastRollout struct {
	Shape Shape
	// Took is from its start to its outcome.
	Took time.Duration
	// Complete is false for a rollout that stopped before it completed
	// (superseded by a newer one, or failed its health check): it ran
	// Took without finishing, so its duration was at least Took.
	Complete bool
	// Failed is set for a rollout that failed its health check.
	Failed bool
}

// perRound is the time per round a rollout took beyond its soaks (false
// when its record lacks the rounds or the duration).
func (r PastRollout) perRound() (time.Duration, bool) {
	if r.Shape.Rounds <= 0 || r.Took <= 0 {
		return 0, false
	}
	return max(r.Took-r.Shape.Soak, 0) / time.Duration(r.Shape.Rounds), true
}

// Prediction is how long a rollout of a shape is expected to take.
type Prediction struct {
	Shape Shape
	// Likely is soak + rounds × the median time per round, Low and High
	// the same with the fastest and slowest.
	Likely, Low, High time.Duration
	// Samples is how many past rollouts it is from; Stopped how many of
	// them stopped before completing (counted at the time they had run).
	Samples, Stopped int
	// FromSettings is set when the history has fewer than
	// MinPredictionSamples usable rollouts (Short of them): Likely is then
	// soak + rounds × DefaultRoundDuration.
	FromSettings bool
	Short        int
	// Peers is, for a pool whose own history is too short, how many
	// pools like it the prediction is from (PredictFromPeers); Short is
	// then how many of its own rollouts it had. 0: its own history, or
	// the declared settings.
	Peers int
	// FailedInARow is how many of the newest rollouts failed their health
	// check.
	FailedInARow int
}

// Predict predicts a rollout of next from the pool's past rollouts
// (newest first). Each past rollout gives a time per round: its duration
// less its declared soaks, over its rounds, so a history of small
// rollouts scales to a large one and a soak-free one to a soaked one. A
// completed rollout is a sample. One that stopped before completing (a
// superseded or failed run) ran that long and was not done, so it counts
// when its time per round is at least the completed ones' median (it was
// at least that slow) and is left out when below (it says nothing of how
// long the rest would have taken). Fewer than MinPredictionSamples
// samples: the declared settings only.
func Predict(next Shape, past []PastRollout) Prediction {
	p := Prediction{Shape: next}
	for _, r := range past {
		if !r.Failed {
			break
		}
		p.FailedInARow++
	}
	done, stopped := perRounds(past) // peers.go
	p.Stopped, p.Samples = stopped, len(done)
	if p.Samples < MinPredictionSamples {
		p.FromSettings, p.Short, p.Stopped = true, p.Samples, 0
		p.Likely = next.Soak + time.Duration(next.Rounds)*DefaultRoundDuration
		p.Low, p.High = p.Likely, p.Likely
		return p
	}
	slices.Sort(done)
	at := func(perRound time.Duration) time.Duration { return next.Soak + time.Duration(next.Rounds)*perRound }
	p.Likely, p.Low, p.High = at(median(done)), at(done[0]), at(done[len(done)-1])
	return p
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// Describe says how long the rollout takes and whether it fits in d (the
// time left in the window, or the next window's length); "" when the
// interval has no end or nothing was predicted.
func (p Prediction) Describe(d time.Duration) string {
	if d <= 0 || p.Shape.Rounds <= 0 {
		return ""
	}
	what := fmt.Sprintf("a rollout of %d machine(s) in %d round(s)", p.Shape.Machines, p.Shape.Rounds)
	if p.Shape.Soak > 0 {
		what += fmt.Sprintf(" with %s of soaks", round(p.Shape.Soak))
	}
	var b strings.Builder
	window := fmt.Sprintf("the %s of the window", round(d))
	past := "runs past its end (it is not stopped)"
	if p.FromSettings {
		fmt.Fprintf(&b, "%s takes about %s by the declared settings (%s a round, the default, plus the soaks): only %d of this pool's rollouts to go by, fewer than %d",
			what, round(p.Likely), round(DefaultRoundDuration), p.Short, MinPredictionSamples)
		if p.Likely <= d {
			fmt.Fprintf(&b, "; it fits %s", window)
		} else {
			fmt.Fprintf(&b, "; it does not fit %s and %s", window, past)
		}
	} else {
		from := fmt.Sprintf("from %d rollouts", p.Samples)
		if p.Stopped > 0 {
			from += fmt.Sprintf(", %d of them stopped before completing", p.Stopped)
		}
		fmt.Fprintf(&b, "%s takes about %s (%s, %s–%s)", what, round(p.Likely), from, round(p.Low), round(p.High))
		switch {
		case p.High <= d:
			fmt.Fprintf(&b, ": it fits %s", window)
		case p.Likely <= d:
			fmt.Fprintf(&b, ": it likely fits %s, a slow one %s", window, past)
		default:
			fmt.Fprintf(&b, ": it does not fit %s and %s", window, past)
		}
	}
	if p.FailedInARow > 0 {
		fmt.Fprintf(&b, "; the last %d rollout(s) failed their health check: a failing one halts (or rolls back) instead of completing", p.FailedInARow)
	}
	return b.String()
}
