package poolmath

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestShapeOf(t *testing.T) {
	gated := func(s *nodepoolv1.NodePoolSpec) {
		s.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)),
			CanarySoak: &metav1.Duration{Duration: 10 * time.Minute}, Soak: &metav1.Duration{Duration: 2 * time.Minute}}
	}
	surge := func(n int32) func(*nodepoolv1.NodePoolSpec) {
		return func(s *nodepoolv1.NodePoolSpec) {
			s.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(n))
		}
	}
	for _, tc := range []struct {
		name              string
		edit              []func(*nodepoolv1.NodePoolSpec)
		desired, machines int32
		want              Shape
		ok                bool
	}{
		{"surge 1: a round per machine", nil, 30, 30, Shape{Machines: 30, Rounds: 30}, true},
		{"surge 3", []func(*nodepoolv1.NodePoolSpec){surge(3)}, 30, 30, Shape{Machines: 30, Rounds: 10}, true},
		{"a forced rollout of a part", []func(*nodepoolv1.NodePoolSpec){surge(3)}, 30, 7, Shape{Machines: 7, Rounds: 3}, true},
		{"gated: the canary round soaks canarySoak, the others soak", []func(*nodepoolv1.NodePoolSpec){gated}, 30, 30,
			Shape{Machines: 30, Rounds: 30, Soak: 10*time.Minute + 29*2*time.Minute}, true},
		{"InPlace: maxUnavailable nodes at a time", []func(*nodepoolv1.NodePoolSpec){func(s *nodepoolv1.NodePoolSpec) {
			s.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
			s.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		}}, 5, 5, Shape{Machines: 5, Rounds: 3}, true},
		{"OnDelete: a person replaces", []func(*nodepoolv1.NodePoolSpec){func(s *nodepoolv1.NodePoolSpec) {
			s.Management.Replace.Strategy = nodepoolv1.ReplaceStrategyOnDelete
		}}, 3, 3, Shape{}, false},
		{"no machines", nil, 0, 0, Shape{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &nodepoolv1.NodePoolSpec{}
			for _, e := range tc.edit {
				e(spec)
			}
			got, ok := ShapeOf(spec, tc.desired, tc.machines)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ShapeOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPredict(t *testing.T) {
	small := Shape{Machines: 3, Rounds: 3}
	soaked := Shape{Machines: 3, Rounds: 3, Soak: 14 * time.Minute}
	big := Shape{Machines: 30, Rounds: 30}
	done := func(s Shape, took time.Duration) PastRollout {
		return PastRollout{Shape: s, Took: took, Complete: true}
	}
	stopped := func(s Shape, took time.Duration) PastRollout { return PastRollout{Shape: s, Took: took} }
	failed := func(s Shape, took time.Duration) PastRollout { return PastRollout{Shape: s, Took: took, Failed: true} }
	for _, tc := range []struct {
		name              string
		next              Shape
		past              []PastRollout
		likely, low, high time.Duration
		samples, stopped  int
		fromSettings      bool
		failedInARow      int
	}{
		{"small rollouts scale to a big pool", big,
			[]PastRollout{done(small, 15*time.Minute), done(small, 12*time.Minute), done(small, 18*time.Minute)},
			150 * time.Minute, 120 * time.Minute, 180 * time.Minute, 3, 0, false, 0},
		{"the declared soaks are taken out of the past and put into the next", Shape{Machines: 30, Rounds: 30, Soak: time.Hour},
			[]PastRollout{done(soaked, 29*time.Minute), done(soaked, 29*time.Minute), done(soaked, 29*time.Minute)},
			time.Hour + 150*time.Minute, time.Hour + 150*time.Minute, time.Hour + 150*time.Minute, 3, 0, false, 0},
		{"a run stopped after longer than the median counts as at least that slow", big,
			[]PastRollout{stopped(small, 30*time.Minute), done(small, 15*time.Minute), done(small, 12*time.Minute), done(small, 18*time.Minute)},
			165 * time.Minute, 120 * time.Minute, 300 * time.Minute, 4, 1, false, 0},
		{"a run stopped early says nothing", big,
			[]PastRollout{stopped(small, 3*time.Minute), done(small, 15*time.Minute), done(small, 12*time.Minute), done(small, 18*time.Minute)},
			150 * time.Minute, 120 * time.Minute, 180 * time.Minute, 3, 0, false, 0},
		{"too short a history: the declared settings", Shape{Machines: 30, Rounds: 30, Soak: time.Hour},
			[]PastRollout{done(small, 15*time.Minute), done(small, 12*time.Minute)},
			time.Hour + 30*15*time.Minute, time.Hour + 30*15*time.Minute, time.Hour + 30*15*time.Minute, 2, 0, true, 0},
		{"records without rounds are not usable", big,
			[]PastRollout{done(Shape{}, 15*time.Minute), done(small, 12*time.Minute), done(small, 18*time.Minute)},
			30 * 15 * time.Minute, 30 * 15 * time.Minute, 30 * 15 * time.Minute, 2, 0, true, 0},
		{"the last three failed after running longer than the one that completed: they count, and are said", big,
			[]PastRollout{failed(small, 20*time.Minute), failed(small, 20*time.Minute), failed(small, 20*time.Minute), done(small, 15*time.Minute), failed(small, time.Minute)},
			200 * time.Minute, 150 * time.Minute, 200 * time.Minute, 4, 3, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Predict(tc.next, tc.past)
			if p.Likely != tc.likely || p.Low != tc.low || p.High != tc.high || p.Samples != tc.samples || p.Stopped != tc.stopped ||
				p.FromSettings != tc.fromSettings || p.FailedInARow != tc.failedInARow {
				t.Errorf("Predict = %+v\nwant likely %s low %s high %s samples %d stopped %d fromSettings %v failed %d",
					p, tc.likely, tc.low, tc.high, tc.samples, tc.stopped, tc.fromSettings, tc.failedInARow)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	small := Shape{Machines: 3, Rounds: 3}
	past := []PastRollout{{Shape: small, Took: 15 * time.Minute, Complete: true}, {Shape: small, Took: 12 * time.Minute, Complete: true},
		{Shape: small, Took: 18 * time.Minute, Complete: true}}
	p := Predict(Shape{Machines: 30, Rounds: 30, Soak: time.Hour}, past)
	for d, want := range map[time.Duration]string{
		5 * time.Hour:                ": it fits the 5h0m0s of the window",
		3*time.Hour + 45*time.Minute: ": it likely fits the 3h45m0s of the window, a slow one runs past its end (it is not stopped)",
		2 * time.Hour:                ": it does not fit the 2h0m0s of the window and runs past its end (it is not stopped)",
	} {
		got := p.Describe(d)
		if !strings.HasPrefix(got, "a rollout of 30 machine(s) in 30 round(s) with 1h0m0s of soaks takes about 3h30m0s (from 3 rollouts, 3h0m0s–4h0m0s)") || !strings.HasSuffix(got, want) {
			t.Errorf("Describe(%s) = %q, want …%q", d, got, want)
		}
	}
	short := Predict(Shape{Machines: 3, Rounds: 3}, past[:1])
	if got := short.Describe(time.Hour); got != "a rollout of 3 machine(s) in 3 round(s) takes about 45m0s by the declared settings (15m0s a round, the default, plus the soaks): "+
		"only 1 of this pool's rollouts to go by, fewer than 3; it fits the 1h0m0s of the window" {
		t.Errorf("too short a history: %q", got)
	}
	failing := Predict(Shape{Machines: 3, Rounds: 3}, append([]PastRollout{{Shape: small, Took: time.Minute, Failed: true}}, past...))
	if got := failing.Describe(time.Hour); !strings.HasSuffix(got, "; the last 1 rollout(s) failed their health check: a failing one halts (or rolls back) instead of completing") {
		t.Errorf("a failed last rollout is not said: %q", got)
	}
	if (Prediction{}).Describe(time.Hour) != "" || p.Describe(0) != "" {
		t.Error("nothing to predict, or an interval without end, says nothing")
	}
}
