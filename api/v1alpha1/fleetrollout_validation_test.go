package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "nodepool.dev/nodepool/api/v1alpha1"
)

func fleetRollout(name string, waves ...intstr.IntOrString) *v1.FleetRollout {
	return &v1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}},
			Waves:        waves,
		},
	}
}

func TestAValidFleetRolloutIsAcceptedWithItsDefaults(t *testing.T) {
	ctx := context.Background()
	fr := fleetRollout("valid-fleet", intstr.FromInt32(1), intstr.FromString("25%"), intstr.FromString("100%"))
	fr.Spec.Soak = &metav1.Duration{Duration: 30 * time.Minute}
	fr.Spec.MaxConcurrent = ptr.To[int32](5)
	if err := env.Client.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, fr) })
	got := &v1.FleetRollout{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fr), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Action != v1.FleetActionApplyPending || got.Spec.HeldPools != v1.HeldPoolWait ||
		got.Spec.StopOn.RolloutUnhealthy == nil || !*got.Spec.StopOn.RolloutUnhealthy {
		t.Fatalf("defaults: action %q, heldPools %q, stopOn %+v", got.Spec.Action, got.Spec.HeldPools, got.Spec.StopOn)
	}
}

func TestInvalidFleetRolloutsAreRefusedWithActionableMessages(t *testing.T) {
	wavesMsg := "spec.waves: every wave must be a count above 0 or a percentage from 1% to 100% of the selected pools"
	cases := []struct {
		name   string
		mutate func(*v1.FleetRollout)
		want   string
	}{
		{"no waves", func(f *v1.FleetRollout) { f.Spec.Waves = nil }, "spec.waves"},
		{"a zero wave", func(f *v1.FleetRollout) { f.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(0)} }, wavesMsg},
		{"a negative wave", func(f *v1.FleetRollout) { f.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(-1)} }, wavesMsg},
		{"a percentage above 100%", func(f *v1.FleetRollout) {
			f.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("150%")}
		}, wavesMsg},
		{"0%", func(f *v1.FleetRollout) { f.Spec.Waves = []intstr.IntOrString{intstr.FromString("0%")} }, wavesMsg},
		{"not a percentage", func(f *v1.FleetRollout) { f.Spec.Waves = []intstr.IntOrString{intstr.FromString("half")} }, wavesMsg},
		{"unknown action", func(f *v1.FleetRollout) { f.Spec.Action = "Upgrade" }, `supported values: "ApplyPending", "Restart"`},
		{"unknown held-pool policy", func(f *v1.FleetRollout) { f.Spec.HeldPools = "Force" }, `supported values: "Wait", "Skip"`},
		{"zero maxConcurrent", func(f *v1.FleetRollout) { f.Spec.MaxConcurrent = ptr.To[int32](0) }, "spec.maxConcurrent"},
		{"negative soak", func(f *v1.FleetRollout) { f.Spec.Soak = &metav1.Duration{Duration: -time.Minute} }, "spec.soak must be a duration between 0s and 720h"},
		{"a name too long for the pools' annotation", func(f *v1.FleetRollout) { f.Name = strings.Repeat("n", 64) }, "metadata.name of a FleetRollout must be at most 63 characters"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetRollout(fmt.Sprintf("bad-fleet-%d", i), intstr.FromInt32(1), intstr.FromString("100%"))
			tc.mutate(f)
			err := env.Client.Create(context.Background(), f)
			if err == nil {
				_ = env.Client.Delete(context.Background(), f)
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, tc.want)
			}
		})
	}
}

func TestAFleetRolloutsSelectionIsFixedAndACancelCannotBeUndone(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		mutate func(*v1.FleetRollout)
		want   string
	}{
		{"poolSelector", func(f *v1.FleetRollout) { f.Spec.PoolSelector.MatchLabels["tier"] = "dev" }, "spec.poolSelector is immutable"},
		{"namespaceSelector", func(f *v1.FleetRollout) {
			f.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		}, "spec.namespaceSelector is immutable"},
		{"waves", func(f *v1.FleetRollout) { f.Spec.Waves = []intstr.IntOrString{intstr.FromString("100%")} }, "spec.waves is immutable"},
		{"action", func(f *v1.FleetRollout) { f.Spec.Action = v1.FleetActionRestart }, "spec.action is immutable"},
		{"cancelled", func(f *v1.FleetRollout) { f.Spec.Cancelled = false }, "spec.cancelled cannot be undone"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetRollout(fmt.Sprintf("fixed-fleet-%d", i), intstr.FromInt32(1), intstr.FromString("100%"))
			f.Spec.Cancelled = tc.name == "cancelled"
			if err := env.Client.Create(ctx, f); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, f) })
			before := f.DeepCopy()
			tc.mutate(f)
			err := env.Client.Patch(ctx, f, client.MergeFrom(before))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
			if tc.name == "cancelled" {
				return
			}
			// What may change still can.
			f = before.DeepCopy()
			f.Spec.Paused = true
			f.Spec.MaxConcurrent = ptr.To[int32](3)
			if err := env.Client.Patch(ctx, f, client.MergeFrom(before)); err != nil {
				t.Fatalf("a mutable field could not change: %v", err)
			}
		})
	}
}
