package poolmath

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestPauseAt(t *testing.T) {
	for _, tc := range []struct {
		value      string
		paused     bool
		until      time.Time
		invalid    bool
		indefinite bool
	}{
		{value: ""},
		{value: "false"},
		{value: "true", paused: true, indefinite: true},
		{value: now.Add(time.Hour).Format(time.RFC3339), paused: true, until: now.Add(time.Hour)},
		{value: now.Format(time.RFC3339)}, // ends at its time
		{value: now.Add(-time.Hour).Format(time.RFC3339)},
		{value: "tomorrow", paused: true, invalid: true, indefinite: true},
		{value: "2026-13-01T00:00:00Z", paused: true, invalid: true, indefinite: true},
	} {
		pool := &nodepoolv1.NodePool{}
		pool.Spec.Management.PausedUntil = tc.value
		p := PauseAt(pool, now)
		if p.Paused != tc.paused || !p.Until.Equal(tc.until) || p.Invalid != tc.invalid || p.Indefinite() != tc.indefinite {
			t.Errorf("pausedUntil %q: got %+v (indefinite %v), want paused %v until %v invalid %v", tc.value, p, p.Indefinite(), tc.paused, tc.until, tc.invalid)
		}
	}
}

func TestDesiredReplicas(t *testing.T) {
	auto := func(lo, hi int32) *nodepoolv1.AutoScaling { return &nodepoolv1.AutoScaling{Min: lo, Max: hi} }
	for _, tc := range []struct {
		name    string
		spec    nodepoolv1.NodePoolSpec
		current *int32
		want    int32
	}{
		{"fixed", nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](3)}, ptr.To[int32](5), 3},
		{"fixed, no MachineDeployment", nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](3)}, nil, 3},
		{"neither", nodepoolv1.NodePoolSpec{}, ptr.To[int32](2), 0},
		{"autoscaled, new pool starts at min", nodepoolv1.NodePoolSpec{AutoScaling: auto(1, 3)}, nil, 1},
		{"autoscaled within bounds keeps the autoscaler's count", nodepoolv1.NodePoolSpec{AutoScaling: auto(1, 3)}, ptr.To[int32](2), 2},
		{"autoscaled above max is clamped to max", nodepoolv1.NodePoolSpec{AutoScaling: auto(1, 3)}, ptr.To[int32](5), 3},
		{"autoscaled below min is raised to min", nodepoolv1.NodePoolSpec{AutoScaling: auto(2, 4)}, ptr.To[int32](0), 2},
	} {
		if got := DesiredReplicas(&tc.spec, tc.current); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestForcedApplied(t *testing.T) {
	at := now
	for _, tc := range []struct {
		after *time.Time
		want  bool
	}{
		{nil, false},
		{ptr.To(at.Add(-time.Second)), false},
		{ptr.To(at), true},
		{ptr.To(at.Add(time.Hour)), true},
	} {
		if got := ForcedApplied(tc.after, at); got != tc.want {
			t.Errorf("rollout.after %v, request %v: got %v, want %v", tc.after, at, got, tc.want)
		}
	}
}

func TestCreatedBefore(t *testing.T) {
	created := []time.Time{now.Add(-time.Hour), now.Add(-time.Second), now, now.Add(time.Second)}
	for _, tc := range []struct {
		at   time.Time
		want int32
	}{
		{now.Add(-2 * time.Hour), 0},
		{now, 2}, // strictly before: a machine of the same second is kept
		{now.Add(time.Second), 3},
		{now.Add(time.Hour), 4},
	} {
		if got := CreatedBefore(created, tc.at); got != tc.want {
			t.Errorf("at %v: got %d, want %d", tc.at, got, tc.want)
		}
	}
}

func TestFencepostsAndSteps(t *testing.T) {
	i := func(v int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(v)) }
	s := func(v string) *intstr.IntOrString { return ptr.To(intstr.FromString(v)) }
	for _, tc := range []struct {
		name                string
		surge, unavailable  *intstr.IntOrString
		desired             int32
		wantSurge, wantUnav int32
		machines, wantSteps int32
	}{
		{"defaults", nil, nil, 3, 1, 0, 3, 3},
		{"surge 3", i(3), i(0), 3, 3, 0, 3, 1},
		{"surge 1 unavailable 1", i(1), i(1), 3, 1, 1, 3, 2},
		{"percent surge rounds up", s("50%"), i(0), 3, 2, 0, 3, 2},
		{"percent unavailable rounds down", i(0), s("50%"), 3, 0, 1, 3, 3},
		{"both zero means unavailable 1", i(0), i(0), 3, 0, 1, 3, 3},
		{"no machines", nil, nil, 0, 1, 0, 0, 0},
		// Found by the prediction property test: Cluster API caps
		// maxUnavailable at the replicas.
		{"unavailable above the replicas is capped", i(1), i(2), 1, 1, 1, 5, 3},
	} {
		gs, gu, err := Fenceposts(tc.surge, tc.unavailable, tc.desired)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if gs != tc.wantSurge || gu != tc.wantUnav {
			t.Errorf("%s: fenceposts %d/%d, want %d/%d", tc.name, gs, gu, tc.wantSurge, tc.wantUnav)
		}
		if got := Steps(tc.machines, gs, gu); got != tc.wantSteps {
			t.Errorf("%s: %d steps, want %d", tc.name, got, tc.wantSteps)
		}
	}
}

func TestInPlaceBudget(t *testing.T) {
	if got := InPlaceMaxUnavailable(nil, 5); got != 1 {
		t.Errorf("default: %d, want 1", got)
	}
	if got := InPlaceMaxUnavailable(ptr.To(intstr.FromString("40%")), 5); got != 2 {
		t.Errorf("40%% of 5: %d, want 2", got)
	}
	if got := InPlaceMaxUnavailable(ptr.To(intstr.FromString("10%")), 5); got != 1 {
		t.Errorf("10%% of 5 rounds down to 0 and is raised to 1: %d", got)
	}
	for _, tc := range []struct{ max, busy, unavailable, want int32 }{
		{2, 0, 0, 2}, {2, 1, 0, 1}, {2, 1, 1, 0}, {1, 0, 3, 0},
	} {
		if got := InPlaceStarts(tc.max, tc.busy, tc.unavailable); got != tc.want {
			t.Errorf("InPlaceStarts(%d, %d, %d) = %d, want %d", tc.max, tc.busy, tc.unavailable, got, tc.want)
		}
	}
}
