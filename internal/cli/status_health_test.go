package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/rollout"
)

func TestRolloutStatusOfAHaltedRolloutIsFailedNamingTheMachine(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{}
	in := settledInput(t, w, now)
	in.Pool.Status.Updating = "Config"
	in.Pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonRolloutHalted, Message: "rollout halted: machine workers-abc node workers-abc turned unhealthy during its canary soak: Ready=False"}}
	st := statusOf(in.Pool, rollout.Decide(in), now)
	if st.Phase != PhaseFailed || st.Health != string(rollout.HealthHalted) || !strings.Contains(st.Message, "workers-abc") {
		t.Errorf("status %s/%s (%s), want %s/Halted naming the machine", st.Phase, st.Health, st.Message, PhaseFailed)
	}
	if line := st.line(); !strings.Contains(line, "failed") {
		t.Errorf("line %q does not say the rollout failed", line)
	}
}

func TestRolloutStatusOfARollbackIsRollingOut(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{FailurePolicy: nodepoolv1.FailurePolicyRollback}
	in := settledInput(t, w, now)
	in.Pool.Status.Updating = "Config"
	in.Pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionRolloutHealthy, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonRollingBack, Message: "rolling back to the previous revision"}}
	if st := statusOf(in.Pool, rollout.Decide(in), now); st.Phase != PhaseRollingOut || st.Health != string(rollout.HealthRollingBack) {
		t.Errorf("status %s/%s (%s), want %s/RollingBack", st.Phase, st.Health, st.Message, PhaseRollingOut)
	}
}

func TestPlanPredictsTheCanaryRoundsAndSoaks(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)),
		CanarySoak: &metav1.Duration{Duration: 10 * time.Minute}, Soak: &metav1.Duration{Duration: time.Minute}}
	in := settledInput(t, w, now)
	live := in.Pool.DeepCopy()
	in.Pool.Spec.Release.Version = "v1.36.4"
	in.Hashes.Rollout = "a-new-rollout"
	r := Predict(in, rollout.Decide(in), live, in.Pool)
	if r.Rollout != PlanNow {
		t.Fatalf("rollout %s (%s), want %s", r.Rollout, r.Message, PlanNow)
	}
	h := r.Health
	if h == nil || h.Canary != 1 || h.CanaryRounds != 1 || h.LaterRounds != 2 || h.MinDuration != "12m0s" {
		t.Fatalf("health prediction %+v, want a canary of 1, 1+2 rounds, at least 12m0s", h)
	}
	if !strings.Contains(r.Message, "health-gated: a canary of 1") || !strings.Contains(r.Message, "at least 12m0s") {
		t.Errorf("message %q does not word the canary and soaks", r.Message)
	}
	if !strings.Contains(r.Message, "canary: 1 machine, surge held at 1 (maxUnavailable 0) until it soaks 10m0s") {
		t.Errorf("message %q does not say how the canary holds its round", r.Message)
	}
}
