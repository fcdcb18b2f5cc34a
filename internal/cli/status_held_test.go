package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/scenario"
)

// A fix waiting for its window is reported as that wait (exit 2 naming
// the window's time), not as the halt it will end: the scenario engine
// drives the pool there (a canary halted in a window, the owner's undo
// after it closed), and `rollout status` reads the pool as the controller
// left it.
func TestRolloutStatusOfAFixWaitingForItsWindowIsHeld(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := scenario.New(start)
	w.Bad["user-configs=c2"] = 10 * time.Minute
	p := w.AddPool(scenario.PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
			Windows: []nodepoolv1.MaintenanceWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "Europe/Berlin"}},
			Gate:    []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner},
		}
		np.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Minute},
			Soak: &metav1.Duration{}, FailurePolicy: nodepoolv1.FailurePolicyHalt}
	}})
	w.After(31*time.Minute, "owner edits the config to c2 (bad; held until the window)", func(*scenario.World) { p.Inputs.Config = "c2" })
	if err := w.RunFor(14 * time.Hour); err != nil {
		t.Fatal(err)
	}
	halted := statusOf(p.Obj, *p.LastPlan(), w.Now)
	if halted.Phase != PhaseFailed {
		t.Fatalf("in the window: %s (%s), want the canary's halt\n%s", halted.Phase, halted.Message, w.Trace())
	}
	if err := w.RunFor(2 * time.Hour); err != nil { // the window closed
		t.Fatal(err)
	}
	w.After(time.Minute, "owner undoes the config (c1, held until the next window)", func(*scenario.World) { p.Inputs.Config = "c1" })
	if err := w.RunFor(time.Hour); err != nil {
		t.Fatal(err)
	}
	st := statusOf(p.Obj, *p.LastPlan(), w.Now)
	if st.Phase != PhasePaused || st.heldByWindow == "" || !strings.Contains(st.Message, "ends the halted rollout") {
		t.Errorf("status %s (%s; held by window %q), want Paused by the window, saying the fix ends the halt\n%s", st.Phase, st.Message, st.heldByWindow, w.Trace())
	}
}

// The current rollout's revision is published in status.rollout: a user
// who cannot read the pool's history still sees it.
func TestTheCurrentRevisionIsPublished(t *testing.T) {
	w := scenario.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := w.AddPool(scenario.PoolSpec{Name: "workers", Replicas: 2})
	w.After(time.Hour, "owner edits the config to c2", func(*scenario.World) { p.Inputs.Config = "c2" })
	if err := w.RunFor(3 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := p.Obj.Status.Rollout; r == nil || r.Revision != 2 {
		t.Fatalf("status.rollout %+v, want revision 2", r)
	}
	st := RolloutStatus{Revision: &StatusRevision{Revision: p.Obj.Status.Rollout.Revision}, Phase: PhaseComplete}
	if got := st.revisionWords(); got != "revision 2" {
		t.Errorf("revision words %q", got)
	}
}

// An owner's rollout whose target boots the latest platform carries the
// pending drift: `rollout status` says so while it rolls (the drift is not
// pending then), both from the engine's plan and from what the controller
// published.
func TestRolloutStatusSaysWhichPlatformChangesTheRolloutAlsoApplies(t *testing.T) {
	w := scenario.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := w.AddPool(scenario.PoolSpec{Name: "workers", Replicas: 3, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Minute},
			Soak: &metav1.Duration{}, FailurePolicy: nodepoolv1.FailurePolicyHalt}
	}})
	w.After(time.Hour, "platform bumps the renderer to r2", func(*scenario.World) { p.Inputs.Platform[scenario.CompRenderer] = "r2" })
	w.After(2*time.Hour, "owner edits the config to c2", func(*scenario.World) { p.Inputs.Config = "c2" })
	if err := w.RunFor(2*time.Hour + 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, plan := range map[string]rollout.Plan{"engine": *p.LastPlan(), "published": publishedPlan(p.Obj)} {
		st := statusOf(p.Obj, plan, w.Now)
		if !slices.Equal(st.Carries, []string{"renderer"}) || !strings.Contains(st.line(), "it also applies platform changes: renderer") {
			t.Errorf("%s: carries %v, line %q; want the renderer\n%s", name, st.Carries, st.line(), w.Trace())
		}
	}
}
