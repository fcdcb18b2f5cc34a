package rollout

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

func TestTheDecisionSaysWhatHappensAndForWhom(t *testing.T) {
	past := metav1.NewTime(t0.Add(-time.Minute))
	future := metav1.NewTime(t0.Add(time.Hour))
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, w *inputstest.World, in *Input)
		action    Action
		initiator Initiator
		at        time.Time
		machines  int32
	}{
		{name: "a settled pool: nothing", action: ActionNone},
		{name: "a version change starts now", action: ActionStart, initiator: InitiatorVersion, at: t0, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) { w.Pool.Spec.Release.Version = "v1.36.4" }},
		{name: "a paused pool defers an owner change", action: ActionDefer, initiator: InitiatorVersion, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Release.Version = "v1.36.4"
				w.Pool.Spec.Management.PausedUntil = "true"
			}},
		{name: "a due restart forces", action: ActionForce, initiator: InitiatorRestart, at: past.Time, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) { w.Pool.Spec.Management.RolloutAfter = &past }},
		{name: "a restart later is scheduled", action: ActionSchedule, initiator: InitiatorRestart, at: future.Time, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) { w.Pool.Spec.Management.RolloutAfter = &future }},
		{name: "a restart no machine is older than replaces nothing", action: ActionNone,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				early := metav1.NewTime(t0.Add(-2 * time.Hour))
				w.Pool.Spec.Management.RolloutAfter = &early
			}},
		{name: "a paused pool defers a due restart", action: ActionDefer, initiator: InitiatorRestart, at: past.Time, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &past
				w.Pool.Spec.Management.PausedUntil = "true"
			}},
		{name: "an expired pause no longer holds a due apply-pending", action: ActionForce, initiator: InitiatorPlatform, at: past.Time, machines: 3,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.PausedUntil = t0.Add(-time.Second).Format(time.RFC3339)
				in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = past.Format(time.RFC3339)
				// What the last reconcile wrote while it was paused.
				in.Pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionUpdatingConfig, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonPaused}}
			}},
		{name: "a bad input is invalid, whatever else is asked", action: ActionInvalid,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &past
				in.RenderErr = errors.New("the chrony ConfigMap is not valid")
			}},
		{name: "a MachineDeployment whose user-data and token are gone holds", action: ActionHold,
			setup: func(t *testing.T, w *inputstest.World, in *Input) {
				in.UserData, in.Tokens = map[string]UserData{}, map[string]Token{}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			if tc.setup != nil {
				tc.setup(t, w, &in)
			}
			err := in.RenderErr
			in = relatest(t, in, w)
			if err != nil {
				in.Latest, in.RenderErr = nil, err
			}
			d := Decide(in).Decision
			if d.Action != tc.action || d.Initiator != tc.initiator || !d.At.Equal(tc.at) || d.Machines != tc.machines {
				t.Errorf("decision %s/%s at %v, %d machines; want %s/%s at %v, %d machines",
					d.Action, d.Initiator, d.At, d.Machines, tc.action, tc.initiator, tc.at, tc.machines)
			}
			if d.Action.Rolls() != (tc.machines > 0) {
				t.Errorf("action %s rolls %v, want %v", d.Action, d.Action.Rolls(), tc.machines > 0)
			}
		})
	}
}

func TestANewPoolIsCreatedForItsOwner(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Replicas = ptr.To[int32](4)
	pl, h := render(t, w)
	d := Decide(Input{Pool: w.Pool, Now: t0, Latest: pl, Hashes: h, Settings: settings}).Decision
	if d.Action != ActionCreate || d.Initiator != InitiatorSpec || d.Machines != 4 || d.TokenPayload != pl.Hash {
		t.Errorf("decision %+v, want Create for spec of 4 machines booting %s", d, pl.Hash)
	}
}

// The engine and the controller once disagreed: for an autoscaled pool of
// min 1 / max 3 at 5 replicas the engine reported 5, the controller wrote 3.
func TestAnAutoscaledPoolAboveItsMaxWantsItsMax(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Replicas = nil
	w.Pool.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: 1, Max: 3}
	in := relatest(t, settled(t, w), w)
	in.MachineDeployment.SpecReplicas = ptr.To[int32](5)
	in.MachineDeployment.Replicas, in.MachineDeployment.ReadyReplicas = 5, 5
	p := Decide(in)
	if p.Decision.Replicas != 3 {
		t.Errorf("desired replicas %d, want 3 (the controller clamps into autoScaling)", p.Decision.Replicas)
	}
	if c := cond(p, nodepoolv1.ConditionReady); c.Message != "5 of 3 machines ready" {
		t.Errorf("Ready %q, want it counted against 3", c.Message)
	}
}

func TestTheEngineDecidesWhenToLookAgain(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	in.Settings.ResyncPeriod = 10 * time.Minute
	if got := Decide(in).RequeueAfter; got != 10*time.Minute {
		t.Errorf("settled pool: requeue after %v, want the resync period", got)
	}
	w.Pool.Spec.Release.Version = "v1.36.4"
	in = relatest(t, in, w)
	if got := Decide(in).RequeueAfter; got != RolloutPollInterval {
		t.Errorf("a rollout that starts: requeue after %v, want %v", got, RolloutPollInterval)
	}
}

func TestAStartingRolloutFinishesTheOneInProgressAsSuperseded(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	if p := Decide(in); p.Finish != OutcomeComplete || !p.FinishedAt.Equal(t0) {
		t.Errorf("settled: finish %q at %v, want Complete now", p.Finish, p.FinishedAt)
	}
	w.Pool.Spec.Release.Version = "v1.36.4"
	in = relatest(t, in, w)
	if p := Decide(in); p.Finish != OutcomeSuperseded || p.Record == nil || !p.FinishedAt.Equal(p.Record.Started) {
		t.Errorf("a new rollout: finish %q at %v, want Superseded when it starts", p.Finish, p.FinishedAt)
	}
}
