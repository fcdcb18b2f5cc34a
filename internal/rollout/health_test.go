package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
)

func TestTheHealthGateDecidesEachMachineAndThePhase(t *testing.T) {
	old := &UserData{Name: "workers-old", RolloutHash: "old", Version: "v1"}
	next := &UserData{Name: "workers-new", RolloutHash: "new", Version: "v1"}
	health := nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Minute},
		Soak: &metav1.Duration{Duration: 10 * time.Second}, ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
	oldM := func(name string) MachineHealth {
		return MachineHealth{Name: name, UserData: old.Name, Version: "v1", Created: t0.Add(-time.Hour), Node: name, Healthy: true,
			HealthySince: t0.Add(-time.Hour), Gate: &Gate{Status: true, Reason: nodepoolv1.GateReasonNotOnTrial}}
	}
	newM := func(name string, created time.Duration, edit func(*MachineHealth)) MachineHealth {
		m := MachineHealth{Name: name, UserData: next.Name, Version: "v1", Created: t0.Add(-created), Signal: "no node yet"}
		if edit != nil {
			edit(&m)
		}
		return m
	}
	healthyFor := func(d time.Duration) func(*MachineHealth) {
		return func(m *MachineHealth) { m.Node, m.Healthy, m.HealthySince, m.Signal = m.Name, true, t0.Add(-d), "" }
	}
	soaking := func(m *MachineHealth) {
		m.Gate = &Gate{Status: false, Reason: nodepoolv1.GateReasonSoaking}
	}
	for _, tc := range []struct {
		name     string
		machines []MachineHealth
		policy   nodepoolv1.FailurePolicy
		phase    HealthPhase
		gates    map[string]string // machine → "True/Reason" or "False/Reason"
		failing  string
		reason   string
		rollback bool
	}{
		{name: "old machines without a gate are marked True, nothing old is blocked", phase: HealthCanary,
			machines: []MachineHealth{{Name: "a", UserData: old.Name, Version: "v1", Node: "a", Healthy: true}},
			gates:    map[string]string{"a": "True/NotOnTrial"}},
		{name: "the canary without a node waits until the progress deadline", phase: HealthCanary,
			machines: []MachineHealth{oldM("a"), newM("c", time.Minute, nil)},
			gates:    map[string]string{"c": "False/WaitingForNode"}},
		{name: "a healthy canary soaks canarySoak", phase: HealthCanary,
			machines: []MachineHealth{oldM("a"), newM("c", time.Minute, healthyFor(30*time.Second))},
			gates:    map[string]string{"c": "False/Soaking"}},
		{name: "a canary healthy for canarySoak passes", phase: HealthRolling,
			machines: []MachineHealth{oldM("a"), newM("c", 2*time.Minute, healthyFor(time.Minute))},
			gates:    map[string]string{"c": "True/Soaked"}},
		{name: "a later machine soaks soak, not canarySoak", phase: HealthRolling,
			machines: []MachineHealth{oldM("a"), newM("c", 5*time.Minute, func(m *MachineHealth) {
				healthyFor(4 * time.Minute)(m)
				m.Gate = &Gate{Status: true, Reason: nodepoolv1.GateReasonSoaked}
			}), newM("d", 30*time.Second, healthyFor(10*time.Second))},
			gates: map[string]string{"d": "True/Soaked"}},
		{name: "a later machine in its soak", phase: HealthSoaking,
			machines: []MachineHealth{oldM("a"), newM("c", 5*time.Minute, func(m *MachineHealth) {
				healthyFor(4 * time.Minute)(m)
				m.Gate = &Gate{Status: true, Reason: nodepoolv1.GateReasonSoaked}
			}), newM("d", 30*time.Second, healthyFor(5*time.Second))},
			gates: map[string]string{"d": "False/Soaking"}},
		{name: "a canary that turns unhealthy during its soak halts the rollout", phase: HealthHalted,
			machines: []MachineHealth{oldM("a"), newM("c", time.Minute, func(m *MachineHealth) {
				m.Node, m.Signal = "c", "Ready=False (KubeletNotReady)"
				soaking(m)
			})},
			gates: map[string]string{"c": "False/Failed"}, failing: "c", reason: nodepoolv1.ReasonRolloutHalted},
		{name: "a canary past the progress deadline without a node fails", phase: HealthHalted,
			machines: []MachineHealth{oldM("a"), newM("c", 5*time.Minute, nil)},
			gates:    map[string]string{"c": "False/ProgressDeadlineExceeded"}, failing: "c", reason: nodepoolv1.ReasonProgressDeadlineExceeded},
		{name: "a failure stays: the failed gate is final", phase: HealthHalted,
			machines: []MachineHealth{oldM("a"), newM("c", time.Minute, func(m *MachineHealth) {
				healthyFor(time.Second)(m)
				m.Gate = &Gate{Status: false, Reason: nodepoolv1.GateReasonFailed, Message: "node c turned unhealthy"}
			})},
			gates: map[string]string{}, failing: "c", reason: nodepoolv1.ReasonRolloutHalted},
		{name: "Rollback rolls a failed rollout back to what the machines ran", phase: HealthRollingBack, policy: nodepoolv1.FailurePolicyRollback,
			machines: []MachineHealth{oldM("a"), newM("c", 5*time.Minute, nil)},
			gates:    map[string]string{"c": "False/ProgressDeadlineExceeded"}, failing: "c", reason: nodepoolv1.ReasonRollingBack, rollback: true},
		{name: "a machine being deleted is left alone", phase: HealthCanary,
			machines: []MachineHealth{oldM("a"), newM("c", 5*time.Minute, func(m *MachineHealth) { m.Deleting = true })},
			gates:    map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := health
			h.FailurePolicy = tc.policy
			pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](3), Management: nodepoolv1.Management{Health: &h}}}
			in := Input{Pool: pool, Now: t0, Machines: tc.machines}
			d := Decision{Target: next, Running: old, Replicas: 3, InProgress: true}
			s := decideHealth(in, d, old)
			if s.Phase != tc.phase {
				t.Errorf("phase %q, want %q", s.Phase, tc.phase)
			}
			got := map[string]string{}
			for _, g := range s.gates {
				st := "False"
				if g.Status {
					st = "True"
				}
				got[g.Machine] = st + "/" + g.Reason
			}
			for m, want := range tc.gates {
				if got[m] != want {
					t.Errorf("gate of %s = %q, want %q (all: %v)", m, got[m], want, got)
				}
			}
			if len(got) != len(tc.gates) {
				t.Errorf("gates written %v, want %v", got, tc.gates)
			}
			if s.Machine != tc.failing || (tc.reason != "" && s.Reason != tc.reason) {
				t.Errorf("failing %q (%s: %s), want %q (%s)", s.Machine, s.Reason, s.Signal, tc.failing, tc.reason)
			}
			if (s.RollbackTo != "") != tc.rollback || (tc.rollback && s.RollbackTo != old.Name) {
				t.Errorf("rollback to %q, want rollback %v", s.RollbackTo, tc.rollback)
			}
		})
	}
}

func TestNoHealthGateWithoutSpecOrForInPlacePools(t *testing.T) {
	pool := &nodepoolv1.NodePool{}
	if s := decideHealth(Input{Pool: pool}, Decision{}, nil); s != nil {
		t.Errorf("no spec.management.health: %+v", s)
	}
	pool.Spec.Management.Health = &nodepoolv1.Health{}
	pool.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
	if s := decideHealth(Input{Pool: pool}, Decision{}, nil); s != nil {
		t.Errorf("InPlace pool: %+v", s)
	}
}

func TestARolledBackConfigurationIsHeldUntilTheOwnerChangesThePool(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{nodepoolv1.AnnotationRolledBack: "bad"}}}
	in := Input{Pool: pool, Latest: &payload.Payload{}, Hashes: payload.Hashes{Rollout: "bad"}}
	if !rollbackHolds(in) {
		t.Error("inputs that render to the rolled-back rollout are not held")
	}
	in.Hashes.Rollout = "newer"
	if rollbackHolds(in) {
		t.Error("a new owner change is held by an older rollback")
	}
}

func TestNodeHealthReadsReadyTheListedConditionsAndSinceWhen(t *testing.T) {
	h := &nodepoolv1.Health{UnhealthyConditions: []nodepoolv1.NodeConditionMatch{{Type: "KernelDeadlock", Status: "True"}},
		RequiredConditions: []string{"example.com/AppHealthy"}}
	cond := func(typ string, s corev1.ConditionStatus, at time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: s, LastTransitionTime: metav1.NewTime(t0.Add(at))}
	}
	for _, tc := range []struct {
		name    string
		conds   []corev1.NodeCondition
		healthy bool
		since   time.Time
		signal  string
	}{
		{name: "no Ready condition", signal: "Ready condition not reported"},
		{name: "NotReady", conds: []corev1.NodeCondition{cond("Ready", corev1.ConditionFalse, 0)}, signal: "Ready=False"},
		{name: "a listed bad condition", conds: []corev1.NodeCondition{cond("Ready", "True", 0), cond("KernelDeadlock", "True", 0), cond("example.com/AppHealthy", "True", 0)}, signal: "KernelDeadlock=True"},
		{name: "a required condition missing", conds: []corev1.NodeCondition{cond("Ready", "True", 0)}, signal: "example.com/AppHealthy condition not reported"},
		{name: "healthy since the latest transition", healthy: true, since: t0.Add(time.Minute),
			conds: []corev1.NodeCondition{cond("Ready", "True", 0), cond("KernelDeadlock", "False", 30*time.Second), cond("example.com/AppHealthy", "True", time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, since, signal := NodeHealth(h, tc.conds)
			if ok != tc.healthy || !since.Equal(tc.since) || !strings.HasPrefix(signal, tc.signal) {
				t.Errorf("NodeHealth = %v since %v %q, want %v since %v %q", ok, since, signal, tc.healthy, tc.since, tc.signal)
			}
		})
	}
}

// A forced rollout (apply-pending, rolloutAfter, the Rollout policy, a
// fleet rollout) keeps the user-data's name while its token serves the
// latest payload: the machines made since rollout.after are on trial.
func TestAForcedRolloutsNewMachinesAreOnTrial(t *testing.T) {
	ud := &UserData{Name: "workers-ud", RolloutHash: "h", Version: "v1"}
	health := nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Minute},
		ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
	forcedAt := t0.Add(-10 * time.Minute)
	old := MachineHealth{Name: "a", UserData: ud.Name, Version: "v1", Created: t0.Add(-time.Hour), Node: "a", Healthy: true,
		HealthySince: t0.Add(-time.Hour), Gate: &Gate{Status: true, Reason: nodepoolv1.GateReasonNotOnTrial}}
	unhealthy := MachineHealth{Name: "b", UserData: ud.Name, Version: "v1", Created: t0.Add(-6 * time.Minute), Node: "b",
		Signal: "Ready=False (KubeletNotReady)"}
	for _, tc := range []struct {
		name       string
		remaining  int32 // machines created before rollout.after not yet replaced
		wantPhase  HealthPhase
		wantGate   string
		wantReason string
	}{
		{"while it replaces machines, a new machine past its deadline halts it", 1, HealthHalted, "False/ProgressDeadlineExceeded", nodepoolv1.ReasonProgressDeadlineExceeded},
		{"once every old machine is gone, a later machine is not on trial", 0, HealthIdle, "True/NotOnTrial", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := health
			pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](1), Management: nodepoolv1.Management{Health: &h}}}
			md := &MachineDeployment{DataSecretName: ud.Name, RolloutAfter: &forcedAt, MachinesBeforeRolloutAfter: tc.remaining}
			in := Input{Pool: pool, Now: t0, Machines: []MachineHealth{old, unhealthy}, MachineDeployment: md}
			d := Decision{Target: ud, Running: ud, Replicas: 1, InProgress: tc.remaining > 0}
			s := decideHealth(in, d, ud)
			got := ""
			for _, g := range s.gates {
				if g.Machine == "b" {
					got = map[bool]string{true: "True", false: "False"}[g.Status] + "/" + g.Reason
				}
			}
			if s.Phase != tc.wantPhase || got != tc.wantGate || s.Reason != tc.wantReason {
				t.Errorf("phase %q, gate of b %q, reason %q; want %q, %q, %q", s.Phase, got, s.Reason, tc.wantPhase, tc.wantGate, tc.wantReason)
			}
		})
	}
}

// A configuration applied again while the rollout that left it still
// drains keeps its user-data, MachineSet and token, which now serves the
// latest payload: on record, the machines made since the rollout started
// are on trial; before it started, and once it ended, they are not.
func TestAConfigurationAppliedAgainIsOnTrialFromItsStart(t *testing.T) {
	ud := &UserData{Name: "workers-ud", RolloutHash: "h", Version: "v1", Created: t0.Add(-2 * time.Hour)}
	health := nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Minute},
		ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
	started := t0.Add(-10 * time.Minute)
	old := MachineHealth{Name: "a", UserData: ud.Name, Version: "v1", Created: t0.Add(-time.Hour), Node: "a", Healthy: true,
		HealthySince: t0.Add(-time.Hour), Gate: &Gate{Status: true, Reason: nodepoolv1.GateReasonNotOnTrial}}
	fresh := MachineHealth{Name: "b", UserData: ud.Name, Version: "v1", Created: t0.Add(-time.Minute), Signal: "no node yet"}
	for _, tc := range []struct {
		name       string
		current    *CurrentRollout
		inProgress bool
		action     Action
		wantPhase  HealthPhase
		wantGate   string
	}{
		{"on record and in progress, a machine made since its start is its canary",
			&CurrentRollout{Revision: 3, RolloutHash: "h", Started: started, InProgress: true}, true, ActionNone, HealthCanary, "False/WaitingForNode"},
		{"as it starts, the pool is on trial",
			&CurrentRollout{Revision: 2, RolloutHash: "other", Started: started.Add(-time.Hour), InProgress: true}, true, ActionStart, HealthCanary, "True/NotOnTrial"},
		{"a record of another rollout puts nothing on trial",
			&CurrentRollout{Revision: 2, RolloutHash: "other", Started: started, InProgress: true}, true, ActionNone, HealthIdle, "True/NotOnTrial"},
		{"a forced rollout's record is the forced rollout's trial, not this one",
			&CurrentRollout{Revision: 3, RolloutHash: "h", Started: started, InProgress: true, Forced: true}, true, ActionNone, HealthIdle, "True/NotOnTrial"},
		{"a new pool's first rollout has nothing to compare with",
			&CurrentRollout{Revision: 1, RolloutHash: "h", Started: started, InProgress: true}, true, ActionNone, HealthIdle, "True/NotOnTrial"},
		{"a rollout that made its user-data is not one applied again, once its old machines are gone",
			&CurrentRollout{Revision: 3, RolloutHash: "h", Started: t0.Add(-2*time.Hour + 500*time.Millisecond), InProgress: true}, true, ActionNone, HealthIdle, "True/NotOnTrial"},
		{"once the rollout ended, a new machine is not on trial",
			&CurrentRollout{Revision: 3, RolloutHash: "h", Started: started}, false, ActionNone, HealthIdle, "True/NotOnTrial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := health
			pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](2), Management: nodepoolv1.Management{Health: &h}}}
			in := Input{Pool: pool, Now: t0, Machines: []MachineHealth{old, fresh}, MachineDeployment: &MachineDeployment{DataSecretName: ud.Name},
				Current: tc.current}
			d := Decision{Action: tc.action, Target: ud, Running: ud, Replicas: 2, InProgress: tc.inProgress}
			s := decideHealth(in, d, ud)
			got := ""
			for _, g := range s.gates {
				if g.Machine == "b" {
					got = map[bool]string{true: "True", false: "False"}[g.Status] + "/" + g.Reason
				}
			}
			if s.Phase != tc.wantPhase || got != tc.wantGate {
				t.Errorf("phase %q, gate of b %q; want %q, %q", s.Phase, got, tc.wantPhase, tc.wantGate)
			}
		})
	}
}

// A scale-up during the canary waits for it: the MachineDeployment keeps
// the machines kept beside the trial, the canary's count when none is
// kept, and, while the machines cannot be judged (Nodes unread), what it
// has; never fewer machines than exist.
func TestAScaleUpDuringTheCanaryIsHeldNeverBelowTheMachinesThatExist(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kept       int32
		trial      int32
		unread     bool
		mdReplicas *int32
		want       *int32
	}{
		{name: "the old machines are kept, the canary surges beside them", kept: 2, trial: 1, want: ptr.To[int32](2)},
		{name: "no machine kept: the pool grows on the canary", kept: 0, want: ptr.To[int32](1)},
		{name: "no machine kept, two on trial made before the hold: both stay", kept: 0, trial: 2, want: ptr.To[int32](2)},
		{name: "Nodes unread: the hold the MachineDeployment has stays", unread: true, mdReplicas: ptr.To[int32](2), want: ptr.To[int32](2)},
		{name: "Nodes unread and no hold: nothing is lowered", unread: true, mdReplicas: ptr.To[int32](5)},
		{name: "as many kept as wanted: nothing to hold", kept: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &nodepoolv1.NodePool{}
			in := Input{Pool: pool, NodesUnread: tc.unread, MachineDeployment: &MachineDeployment{SpecReplicas: tc.mdReplicas}}
			h := &HealthState{Phase: HealthCanary, Kept: tc.kept, Trial: tc.trial}
			h.Settings.Canary = 1
			p := &Plan{MachineDeployment: &MachineDeploymentTarget{}}
			said := holdScaleUp(in, Decision{Replicas: 5, Health: h}, p)
			got := p.MachineDeployment.Replicas
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want || (said == "") != (tc.want == nil) {
				t.Errorf("held at %v (%q), want %v", ptr.Deref(got, -1), said, ptr.Deref(tc.want, -1))
			}
		})
	}
}
