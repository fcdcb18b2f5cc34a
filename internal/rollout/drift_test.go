package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// TestDriftAgeCountsFromWhenTheNodesFirstDiffered: a pending change keeps
// the time the nodes first differed from the platform in that component,
// however often the platform changes it again, so driftDeadline is
// reached; a drift that ends (the nodes took the change) and comes back
// counts anew.
func TestDriftAgeCountsFromWhenTheNodesFirstDiffered(t *testing.T) {
	fortyDays := t0.Add(-40 * 24 * time.Hour)
	renderer := func(w *inputstest.World, v string) { w.Settings.RendererVersion = v }
	for _, tc := range []struct {
		name string
		// nodes is the renderer the nodes run; seen the renderer the
		// previous status saw as desired (pending since forty days);
		// latest the renderer of the latest payload.
		nodes, seen, latest string
		// wantSince of the renderer row; wantDeadline whether the deadline
		// has passed.
		wantSince    time.Time
		wantDeadline bool
	}{
		{name: "the same desired value keeps its age",
			nodes: "", seen: "v0.2.0", latest: "v0.2.0", wantSince: fortyDays, wantDeadline: true},
		{name: "another bump of a component the nodes still lack keeps its age",
			nodes: "", seen: "v0.2.0", latest: "v0.3.0", wantSince: fortyDays, wantDeadline: true},
		{name: "a drift the nodes took and that comes back counts anew",
			nodes: "v0.2.0", seen: "v0.2.0", latest: "v0.3.0", wantSince: t0, wantDeadline: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			original, _ := render(t, w)
			if tc.nodes != "" {
				renderer(w, tc.nodes)
			}
			in := settled(t, w)
			in.Pool.Spec.Management.Maintenance = daily()
			in.Pool.Spec.Management.Maintenance.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
			w.Pool.Spec = in.Pool.Spec
			renderer(w, tc.seen)
			seen, _ := render(t, w)
			in.Pool.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{
				Component: inputs.Renderer.Name(), Since: metav1.NewTime(fortyDays),
				Current: original.Manifest[inputs.Renderer], Desired: seen.Manifest[inputs.Renderer],
			}}
			renderer(w, tc.latest)
			in = relatest(t, in, w)
			p := Decide(in)
			if len(p.Pending) != 1 || p.Pending[0].Component != inputs.Renderer.Name() {
				t.Fatalf("pending = %+v, want the renderer", p.Pending)
			}
			if got := p.Pending[0].Since.Time; !got.Equal(tc.wantSince) {
				t.Errorf("since = %v, want %v", got, tc.wantSince)
			}
			if st := p.Maintenance; st == nil || st.DriftDeadline == nil || !st.DriftDeadline.Time.Equal(tc.wantSince.Add(720*time.Hour)) {
				t.Errorf("status.maintenance = %+v, want the deadline 720h after %v", st, tc.wantSince)
			}
			if got := p.Decision.Forced != nil && p.Decision.Forced.Initiator == InitiatorDeadline; got != tc.wantDeadline {
				t.Errorf("deadline request %+v, want one: %v", p.Decision.Forced, tc.wantDeadline)
			}
		})
	}
}

// The Rollout policy replaces every machine made before the platform last
// changed a component (machines made since boot the latest payload), while
// driftDeadline counts from when the nodes first differed: another bump
// moves the policy's request, not the drift's age.
func TestTheRolloutPolicyRollsTheLatestBumpWhileTheDriftKeepsItsAge(t *testing.T) {
	fortyDays := t0.Add(-40 * 24 * time.Hour)
	w := inputstest.New()
	w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	original, _ := render(t, w)
	in := settled(t, w)
	w.Settings.RendererVersion = "v0.2.0"
	seen, _ := render(t, w)
	in.Pool.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{
		Component: inputs.Renderer.Name(), Since: metav1.NewTime(fortyDays),
		Current: original.Manifest[inputs.Renderer], Desired: seen.Manifest[inputs.Renderer],
	}}
	w.Settings.RendererVersion = "v0.3.0"
	in = relatest(t, in, w)
	in.Pool.Spec.Management.PausedUntil = "true" // the policy's request waits
	p := Decide(in)
	if len(p.Pending) != 1 || !p.Pending[0].Since.Time.Equal(fortyDays) {
		t.Fatalf("pending %+v, want the renderer pending since %v", p.Pending, fortyDays)
	}
	if f := p.Decision.Forced; f == nil || f.Initiator != InitiatorPolicy || !f.At.Equal(t0) {
		t.Errorf("forced %+v, want the policy's request at the latest bump (%v)", f, t0)
	}
	// The next reconcile sees the same: the request stays put.
	in.Pool.Status.PendingManagementChanges = p.Pending
	in.Now = t0.Add(time.Hour)
	if f := Decide(in).Decision.Forced; f == nil || !f.At.Equal(t0) {
		t.Errorf("an hour later forced %+v, want the request still at %v", f, t0)
	}
}
