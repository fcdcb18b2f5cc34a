package rollout

import (
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// Every phase of the standing, with what holds it, its steps, what it
// changes, what a new node boots and when it changes by itself.
func TestTheStandingSaysWhereAPoolStands(t *testing.T) {
	pauseEnds := t0.Add(2 * time.Hour)
	later := metav1.NewTime(t0.Add(time.Hour))
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	closed := windows(window("0 8 * * *", time.Hour, "UTC")) // at 12:00 the window opens tomorrow at 08:00
	health := &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: time.Minute}, ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
	failing := func(in *Input, oldUD string, newUD UserData) {
		in.Now = t0.Add(10 * time.Minute)
		oldV := in.UserData[oldUD].Version
		in.Machines = []MachineHealth{onOld("a", oldUD, oldV), onOld("b", oldUD, oldV), onOld("c", oldUD, oldV),
			{Name: "n1", UserData: newUD.Name, Version: newUD.Version, Created: t0.Add(time.Minute), Node: "n1", Signal: "Ready=False",
				Gate: &Gate{Status: false, Reason: nodepoolv1.GateReasonFailed, Message: "node n1 turned unhealthy"}}}
	}
	for _, tc := range []struct {
		name     string
		input    func(t *testing.T) Input
		phase    Phase
		settled  bool
		heldBy   HeldBy
		until    time.Time
		changing []string
		steps    bool
		next     string
	}{
		{name: "a settled pool is Settled and changes by itself never", phase: PhaseSettled, settled: true,
			input: func(t *testing.T) Input { return settled(t, inputstest.New()) }},
		{name: "a pool whose MachineDeployment Cluster API has not observed yet is not settled", phase: PhaseScaling,
			input: func(t *testing.T) Input {
				in := settled(t, inputstest.New())
				in.MachineDeployment.Complete = false // status.observedGeneration behind
				return in
			}},
		{name: "a pool with a machine not ready is Scaling", phase: PhaseScaling,
			input: func(t *testing.T) Input {
				in := settled(t, inputstest.New())
				in.MachineDeployment.ReadyReplicas = 2
				return in
			}},
		{name: "an owner change that starts now is Rolling", phase: PhaseRolling, changing: []string{"Version"}, steps: true,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				in := settled(t, w)
				w.Pool.Spec.Release.Version = "v1.36.4"
				return relatest(t, in, w)
			}},
		{name: "a rollout in progress is Rolling", phase: PhaseRolling, changing: []string{"Version"}, steps: true,
			input: func(t *testing.T) Input {
				in, _, _, _ := halfwayThroughAVersionRollout(t, inputstest.New())
				return in
			}},
		{name: "a pause holds an owner change until it ends", phase: PhaseHeld, settled: true, heldBy: HeldByPause, until: pauseEnds,
			changing: []string{"Version"}, steps: true, next: NextPauseEnds,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				in := settled(t, w)
				w.Pool.Spec.Release.Version = "v1.36.4"
				w.Pool.Spec.Management.PausedUntil = pauseEnds.Format(time.RFC3339)
				return relatest(t, in, w)
			}},
		{name: "a maintenance window holds apply-pending until it opens", phase: PhaseHeld, settled: true, heldBy: HeldByMaintenanceWindow,
			until: day.Add(8 * time.Hour), changing: []string{"Forced"}, steps: true, next: NextWindowOpens,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.Maintenance = closed
				in := settled(t, w)
				in.Now = day.Add(-12 * time.Hour)
				in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = in.Now.Add(-time.Second).Format(time.RFC3339)
				return in
			}},
		{name: "a pause outranks a window", phase: PhaseHeld, settled: true, heldBy: HeldByPause, changing: []string{"Forced"}, steps: true,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.Maintenance = closed
				w.Pool.Spec.Management.PausedUntil = "true"
				in := settled(t, w)
				in.Now = day.Add(-12 * time.Hour)
				in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = in.Now.Add(-time.Second).Format(time.RFC3339)
				return in
			}},
		{name: "a restart set for later is held by its schedule", phase: PhaseHeld, settled: true, heldBy: HeldBySchedule, until: later.Time,
			changing: []string{"Forced"}, steps: true, next: NextScheduledRollout,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.RolloutAfter = &later
				return settled(t, w)
			}},
		{name: "user-data gone from under the MachineDeployment holds", phase: PhaseHeld, heldBy: HeldByMissingUserData, settled: true,
			input: func(t *testing.T) Input {
				in := settled(t, inputstest.New())
				in.UserData, in.Tokens = map[string]UserData{}, map[string]Token{}
				return in
			}},
		{name: "a failed canary halts the rollout", phase: PhaseHalted, changing: []string{"Version"}, steps: true,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.Health = health.DeepCopy()
				in, oldUD, newUD, _ := halfwayThroughAVersionRollout(t, w)
				failing(&in, oldUD, newUD)
				return in
			}},
		{name: "a drain blocked past its timeout under onTimeout Halt halts the rollout", phase: PhaseHalted, changing: []string{"Version"}, steps: true,
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.Drain = &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainHalt, Timeout: &metav1.Duration{Duration: 30 * time.Minute}}
				in, _, _, _ := halfwayThroughAVersionRollout(t, w)
				in.Drains = []NodeDrain{{Machine: "a", Node: "a", Since: in.Now.Add(-time.Hour),
					Pods: []nodepoolv1.DrainBlocker{{Pod: "apps/web-1", Budget: "web", Reason: "its eviction is refused"}}}}
				return in
			}},
		{name: "a failed canary under failurePolicy Rollback rolls back", phase: PhaseRollingBack, steps: true, changing: []string{"Version"},
			input: func(t *testing.T) Input {
				w := inputstest.New()
				w.Pool.Spec.Management.Health = health.DeepCopy()
				w.Pool.Spec.Management.Health.FailurePolicy = nodepoolv1.FailurePolicyRollback
				in, oldUD, newUD, _ := halfwayThroughAVersionRollout(t, w)
				failing(&in, oldUD, newUD)
				return in
			}},
		{name: "bad inputs are Invalid, whatever else is asked", phase: PhaseInvalid, settled: true,
			input: func(t *testing.T) Input {
				in := settled(t, inputstest.New())
				in.Pool.Spec.Management.RolloutAfter = &later
				in.Latest, in.RenderErr = nil, errors.New("the chrony ConfigMap is not valid")
				return in
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.input(t))
			s := p.Decision.Standing
			if s.Phase != tc.phase || s.Settled != tc.settled {
				t.Fatalf("standing %s settled=%v (%s), want %s settled=%v", s.Phase, s.Settled, s.Message, tc.phase, tc.settled)
			}
			by, until := HeldBy(""), time.Time{}
			if s.Hold != nil {
				by, until = s.Hold.By, s.Hold.Until
				if s.Hold.Message == "" {
					t.Error("a hold that says nothing")
				}
			}
			if by != tc.heldBy || !until.Equal(tc.until) {
				t.Errorf("held by %q until %v, want %q until %v", by, until, tc.heldBy, tc.until)
			}
			if !slices.Equal(s.Changing, tc.changing) {
				t.Errorf("changing %v, want %v", s.Changing, tc.changing)
			}
			if (s.Steps != nil) != tc.steps || (s.Steps != nil && (s.Steps.Machines == 0 || s.Steps.Rounds == 0)) {
				t.Errorf("steps %+v, want steps: %v", s.Steps, tc.steps)
			}
			if s.NextReason != tc.next || (tc.next == "") != s.Next.IsZero() {
				t.Errorf("next change %v (%s), want %q", s.Next, s.NextReason, tc.next)
			}
			if tc.phase != PhaseSettled && tc.phase != PhaseInvalid && s.Message == "" {
				t.Error("a phase that does not say what it does")
			}
			if s.Boots != p.Decision.TokenPayload {
				t.Errorf("boots %q, want the token's payload %q", s.Boots, p.Decision.TokenPayload)
			}
		})
	}
}

// The steps of a health-gated rollout count its canary and its soaks.
func TestTheStepsOfAGatedRolloutCountItsCanaryAndSoaks(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 10 * time.Minute}, Soak: &metav1.Duration{Duration: 5 * time.Minute}}
	in := settled(t, w)
	w.Pool.Spec.Release.Version = "v1.36.4"
	s := Decide(relatest(t, in, w)).Decision.Standing
	if s.Steps == nil || s.Steps.Machines != 3 || s.Steps.Canary != 1 || s.Steps.Rounds < 2 || s.Steps.Soak < 10*time.Minute {
		t.Errorf("steps %+v, want 3 machines, a canary of 1, its soak and at least two rounds", s.Steps)
	}
}

// A pool that does not move keeps its published standing at every look,
// so the controller writes nothing for it.
func TestThePublishedStandingOfAPoolThatDoesNotMoveStaysTheSame(t *testing.T) {
	for name, in := range map[string]func() Input{
		"settled": func() Input { return settled(t, inputstest.New()) },
		"paused": func() Input {
			w := inputstest.New()
			in := settled(t, w)
			w.Pool.Spec.Release.Version = "v1.36.4"
			w.Pool.Spec.Management.PausedUntil = t0.Add(2*time.Hour + 500*time.Millisecond).Format(time.RFC3339Nano)
			return relatest(t, in, w)
		},
		"held by a window": func() Input {
			w := inputstest.New()
			w.Pool.Spec.Management.Maintenance = windows(window("0 8 * * *", time.Hour, "UTC"))
			in := settled(t, w)
			in.Now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = in.Now.Add(-time.Second).Format(time.RFC3339)
			return in
		},
		"a restart scheduled": func() Input {
			w := inputstest.New()
			later := metav1.NewTime(t0.Add(time.Hour))
			w.Pool.Spec.Management.RolloutAfter = &later
			return settled(t, w)
		},
	} {
		first := in()
		again := in()
		again.Now = first.Now.Add(37 * time.Second)
		a, b := Decide(first).Decision.Standing.Published(), Decide(again).Decision.Standing.Published()
		if !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s: the standing moved with the clock: %+v, then %+v", name, a, b)
		}
		if a.Next != nil && a.Next.At.Nanosecond() != 0 {
			t.Errorf("%s: next change %v is not a whole second, as the API server stores it", name, a.Next.At)
		}
	}
}
