package poolmath

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestTheCanaryResolvesAgainstThePoolAndDefaultsApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		canary  *intstr.IntOrString
		desired int32
		want    int32
	}{
		{name: "default one machine", desired: 10, want: 1},
		{name: "a number", canary: ptr.To(intstr.FromInt32(3)), desired: 10, want: 3},
		{name: "a percentage rounds up", canary: ptr.To(intstr.FromString("15%")), desired: 10, want: 2},
		{name: "a small percentage is still one machine", canary: ptr.To(intstr.FromString("1%")), desired: 10, want: 1},
		{name: "never more than the pool", canary: ptr.To(intstr.FromInt32(5)), desired: 2, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Health(&nodepoolv1.Health{Canary: tc.canary}, tc.desired)
			if s.Canary != tc.want {
				t.Errorf("canary %d, want %d", s.Canary, tc.want)
			}
			if s.CanarySoak != DefaultCanarySoak || s.Soak != DefaultSoak || s.ProgressDeadline != DefaultProgressDeadline || s.Policy != nodepoolv1.FailurePolicyHalt {
				t.Errorf("defaults not applied: %+v", s)
			}
		})
	}
	if Health(nil, 3) != nil {
		t.Error("a pool without a health gate has settings")
	}
}

func TestAGatedRolloutTakesTheCanarySoakAndASoakPerLaterRound(t *testing.T) {
	s := *Health(&nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Minute},
		Soak: &metav1.Duration{Duration: 10 * time.Second}}, 5)
	for _, tc := range []struct {
		machines, surge, unavailable int32
		canaryRounds, laterRounds    int32
		total                        time.Duration
	}{
		{machines: 5, surge: 1, canaryRounds: 1, laterRounds: 4, total: time.Minute + 40*time.Second},
		{machines: 5, surge: 2, canaryRounds: 1, laterRounds: 2, total: time.Minute + 20*time.Second},
		{machines: 1, surge: 1, canaryRounds: 1, total: time.Minute},
		{machines: 0, surge: 1},
	} {
		c, l, total := MinRolloutDuration(s, tc.machines, tc.surge, tc.unavailable)
		if c != tc.canaryRounds || l != tc.laterRounds || total != tc.total {
			t.Errorf("%d machines, surge %d: %d+%d rounds, %s; want %d+%d, %s", tc.machines, tc.surge, c, l, total, tc.canaryRounds, tc.laterRounds, tc.total)
		}
	}
}

// The canary is one round whatever maxSurge and maxUnavailable are: its
// surge is held at the canary while it is on trial.
func TestTheCanaryIsOneRoundOfItsOwn(t *testing.T) {
	s := *Health(&nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(3)), CanarySoak: &metav1.Duration{Duration: time.Minute}}, 10)
	if c, l, total := MinRolloutDuration(s, 10, 1, 0); c != 1 || l != 7 || total != time.Minute {
		t.Errorf("a canary of 3 with surge 1: %d+%d rounds, %s; want 1+7, 1m0s", c, l, total)
	}
}
