package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// settledInput is the engine's input for a pool whose 3 machines run the
// payload of the world as it is.
func settledInput(t *testing.T, w *inputstest.World, now time.Time) rollout.Input {
	t.Helper()
	pl, h, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	pool := w.Pool.DeepCopy()
	pool.Generation, pool.Status.ObservedGeneration = 2, 2
	ud := rollout.UserData{Name: secrets.UserDataSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout,
		RolloutWithoutVersion: h.RolloutWithoutVersion, Version: pool.Spec.Release.Version, PayloadHash: pl.Hash}
	tok := rollout.Token{Name: secrets.TokenSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout, PayloadHash: pl.Hash, RotatedAt: now}
	pool.Annotations = map[string]string{nodepoolv1.AnnotationCurrentRolloutConfig: h.RolloutWithoutVersion, nodepoolv1.AnnotationCurrentPayload: pl.Hash}
	pool.Status.Version, pool.Status.Replicas, pool.Status.ReadyReplicas, pool.Status.UpdatedReplicas = pool.Spec.Release.Version, 3, 3, 3
	created := now.Add(-time.Hour)
	return rollout.Input{Pool: pool, Now: now, Latest: pl, Hashes: h,
		MachineDeployment: &rollout.MachineDeployment{DataSecretName: ud.Name, Version: ud.Version, Complete: true,
			Replicas: 3, ReadyReplicas: 3, UpToDateReplicas: 3, MachinesCreated: []time.Time{created, created, created}},
		UserData: map[string]rollout.UserData{ud.Name: ud}, Tokens: map[string]rollout.Token{tok.Name: tok},
		Payloads: map[string]*payload.Payload{pl.Hash: pl}, Referenced: map[string]bool{ud.Name: true}}
}

// `rollout status` once read the pause from the last reconcile's
// conditions: with pausedUntil expired and apply-pending due, the engine
// starts the rollout while status said Paused.
func TestStatusOfAnExpiredPauseWithADueApplyPendingIsStarting(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	in.Pool.Spec.Management.PausedUntil = now.Add(-time.Second).Format(time.RFC3339)
	in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = now.Add(-2 * time.Second).Format(time.RFC3339)
	in.Pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionUpdatingConfig, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonPaused, Message: "a forced rollout (platform) is pending; the pool is paused"}}
	plan := rollout.Decide(in)
	if plan.Decision.Action != rollout.ActionForce {
		t.Fatalf("engine decides %s, want Force", plan.Decision.Action)
	}
	if st := statusOf(in.Pool, plan, now); st.Phase != PhaseStarting {
		t.Errorf("status %s (%s), want %s: the engine starts the rollout now", st.Phase, st.Message, PhaseStarting)
	}
}

// `rollout status` once said Starting for 30 s after a restart no machine
// is older than, which the engine knows replaces nothing.
func TestStatusOfARestartThatReplacesNothingIsComplete(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	early := metav1.NewTime(now.Add(-2 * time.Hour))
	in.Pool.Spec.Management.RolloutAfter = &early
	if st := statusOf(in.Pool, rollout.Decide(in), now); st.Phase != PhaseComplete {
		t.Errorf("status %s (%s), want %s", st.Phase, st.Message, PhaseComplete)
	}
}

// The fleet view once took status.replicas as an autoscaled pool's desired
// count whatever its bounds; the controller clamps it into them.
func TestFleetDesiredOfAnAutoscaledPoolIsWithinItsBounds(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Replicas = nil
	w.Pool.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: 1, Max: 3}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, w, now)
	in.Pool.Status.Replicas = 5
	five := int32(5)
	in.MachineDeployment.SpecReplicas = &five
	engine := rollout.Decide(in).Decision.Replicas
	rows := fleetRows(now, []nodepoolv1.NodePool{*in.Pool}, false)
	if len(rows) != 1 || rows[0].Desired != engine || engine != 3 {
		t.Errorf("fleet desired %+v, engine %d: want both 3", rows, engine)
	}
}

// `rollout status` says Failed for a pool whose inputs do not render from
// the engine's standing (Invalid, naming the validity condition), not from
// conditions of its own reading: the pool's status here has none.
func TestStatusOfAPoolWhoseInputsDoNotRenderIsFailedFromItsStanding(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	in.RenderErr, in.Latest = errors.New("the ignition fragment does not parse"), nil
	in.Pool.Status.Conditions = nil
	plan := rollout.Decide(in)
	if plan.Decision.Standing.Phase != rollout.PhaseInvalid {
		t.Fatalf("standing %s, want Invalid", plan.Decision.Standing.Phase)
	}
	st := statusOf(in.Pool, plan, now)
	if st.Phase != PhaseFailed || !strings.Contains(st.Message, "ValidGeneratedPayload is False (InvalidPayload): the ignition fragment does not parse") {
		t.Errorf("status %s (%s), want Failed naming ValidGeneratedPayload and the error", st.Phase, st.Message)
	}
	in.Pool.Status.Rollout = plan.Decision.Standing.Published() // as the controller publishes it
	if again := statusOf(in.Pool, plan, now); again.Phase != PhaseFailed || again.Message != st.Message {
		t.Errorf("status from status.rollout %s (%s), want %s (%s)", again.Phase, again.Message, st.Phase, st.Message)
	}
}
