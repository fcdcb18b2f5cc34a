package poolmath

import (
	"testing"
	"time"
)

func TestPredictFromPeers(t *testing.T) {
	five := Shape{Machines: 5, Rounds: 5}
	soaked := Shape{Machines: 5, Rounds: 5, Soak: 10 * time.Minute}
	done := func(s Shape, took time.Duration) PastRollout {
		return PastRollout{Shape: s, Took: took, Complete: true}
	}
	peer := func(machines int32, perRound time.Duration) PeerTime {
		return PeerTime{Machines: machines, PerRound: perRound}
	}
	settings := 5 * DefaultRoundDuration
	for _, tc := range []struct {
		name              string
		next              Shape
		past              []PastRollout
		peers             []PeerTime
		likely, low, high time.Duration
		fromSettings      bool
		peersUsed, short  int
	}{
		{"no pool like it: the declared settings", five, []PastRollout{done(five, 16*time.Second)}, nil,
			settings, settings, settings, true, 0, 1},
		{"pools like it and its own rollout are voices", five, []PastRollout{done(five, 20*time.Second)},
			[]PeerTime{peer(4, 3*time.Second), peer(6, 5*time.Second), peer(5, 6*time.Second)},
			5 * (9 * time.Second / 2), 15 * time.Second, 30 * time.Second, false, 3, 1},
		{"pools of other sizes are not like it", five, nil,
			[]PeerTime{peer(2, time.Second), peer(11, time.Hour), peer(10, 2*time.Second)},
			10 * time.Second, 10 * time.Second, 10 * time.Second, false, 1, 0},
		{"the soaks are added to the peers' time per round", soaked, nil, []PeerTime{peer(5, time.Minute)},
			15 * time.Minute, 15 * time.Minute, 15 * time.Minute, false, 1, 0},
		{"a pool with its own history does not read its peers", five,
			[]PastRollout{done(five, 5*time.Minute), done(five, 5*time.Minute), done(five, 5*time.Minute)}, []PeerTime{peer(5, time.Hour)},
			5 * time.Minute, 5 * time.Minute, 5 * time.Minute, false, 0, 0},
		{"ten voices or more: the spread is the 10th to 90th percentile", five, nil,
			[]PeerTime{peer(5, 1*time.Second), peer(5, 2*time.Second), peer(5, 3*time.Second), peer(5, 4*time.Second), peer(5, 5*time.Second),
				peer(5, 6*time.Second), peer(5, 7*time.Second), peer(5, 8*time.Second), peer(5, 9*time.Second), peer(5, 100*time.Second)},
			5 * (11 * time.Second / 2), 10 * time.Second, 45 * time.Second, false, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PredictFromPeers(tc.next, tc.past, tc.peers)
			if p.Likely != tc.likely || p.Low != tc.low || p.High != tc.high || p.FromSettings != tc.fromSettings || p.Peers != tc.peersUsed || p.Short != tc.short {
				t.Errorf("PredictFromPeers = %+v\nwant likely %s low %s high %s fromSettings %v peers %d short %d",
					p, tc.likely, tc.low, tc.high, tc.fromSettings, tc.peersUsed, tc.short)
			}
		})
	}
}

func TestPeerTimeOf(t *testing.T) {
	three := Shape{Machines: 3, Rounds: 3}
	done := func(took time.Duration) PastRollout { return PastRollout{Shape: three, Took: took, Complete: true} }
	if _, ok := PeerTimeOf(3, []PastRollout{done(3 * time.Minute), done(6 * time.Minute)}); ok {
		t.Error("two rollouts: a peer time, want none (fewer than MinPredictionSamples)")
	}
	if pt, ok := PeerTimeOf(3, []PastRollout{done(3 * time.Minute), done(6 * time.Minute), done(9 * time.Minute)}); !ok || pt.PerRound != 2*time.Minute || pt.Machines != 3 {
		t.Errorf("PeerTimeOf = %+v %v, want 2m a round of 3 machines", pt, ok)
	}
}
