package poolmath

import (
	"slices"
	"time"
)

// MaxPeers is how many pools like a young pool its prediction reads at
// most: those nearest in machine count.
const MaxPeers = 64

// PeerTime is what one pool's history says of its rollouts, for the
// pools like it: its median time per round beyond the soaks.
type PeerTime struct {
	Machines int32
	PerRound time.Duration
}

// PeerTimeOf is the pool's time per round when its history is long
// enough to trust (Predict's rule: MinPredictionSamples usable rollouts);
// false otherwise.
func PeerTimeOf(machines int32, past []PastRollout) (PeerTime, bool) {
	done, _ := perRounds(past)
	ok := len(done) >= MinPredictionSamples
	if !ok {
		return PeerTime{}, false
	}
	return PeerTime{Machines: machines, PerRound: median(done)}, true
}

// Like reports whether two machine counts are similar enough for one
// pool's time per round to stand for the other's: within a factor of two.
func Like(a, b int32) bool {
	return a > 0 && b > 0 && a <= 2*b && b <= 2*a
}

// PredictFromPeers predicts the rollout of a pool whose own history is
// too short (Predict says FromSettings) from the pools like it (the
// caller's choice: the same infrastructure template kind and provider,
// the same upgrade type; Like machine counts): each such pool is one
// voice, its median time per round, and each of the pool's own usable
// rollouts another. Likely is the median voice, Low and High the 10th
// and 90th percentile (the fastest and slowest of fewer than ten). With
// no pool like it, the prediction is Predict's: the declared settings.
func PredictFromPeers(next Shape, past []PastRollout, peers []PeerTime) Prediction {
	p := Predict(next, past)
	if !p.FromSettings || next.Rounds <= 0 {
		return p
	}
	var voices []time.Duration
	for _, peer := range peers {
		if Like(peer.Machines, next.Machines) {
			voices = append(voices, peer.PerRound)
			p.Peers++
		}
	}
	if p.Peers == 0 {
		return p
	}
	for _, r := range past {
		if d, ok := r.perRound(); ok && r.Complete {
			voices = append(voices, d)
		}
	}
	slices.Sort(voices)
	at := func(perRound time.Duration) time.Duration { return next.Soak + time.Duration(next.Rounds)*perRound }
	lo, hi := 0, len(voices)-1
	if len(voices) >= 10 {
		lo, hi = len(voices)/10, len(voices)-1-len(voices)/10
	}
	p.FromSettings = false
	p.Likely, p.Low, p.High = at(median(voices)), at(voices[lo]), at(voices[hi])
	return p
}

// perRounds are the times per round Predict trusts: the completed
// rollouts', and the stopped ones' at least as slow as their median
// (how many of those: stoppedUsed).
func perRounds(past []PastRollout) (done []time.Duration, stoppedUsed int) {
	var stopped []time.Duration
	for _, r := range past {
		d, ok := r.perRound()
		switch {
		case !ok:
		case r.Complete:
			done = append(done, d)
		default:
			stopped = append(stopped, d)
		}
	}
	if len(done) > 0 {
		med := median(done)
		for _, d := range stopped {
			if d >= med {
				done = append(done, d)
				stoppedUsed++
			}
		}
	}
	return done, stoppedUsed
}
