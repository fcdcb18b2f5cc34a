package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/secrets"
)

func TestInPlaceUpdates(t *testing.T) {
	oldUD, newUD := "workers-old", "workers-new"
	target := &UserData{Name: newUD, RolloutHash: "new", Version: "v1.36.3", PayloadHash: "p-new"}
	tokenName := secrets.TokenSecretName("workers", "new")
	machine := func(name string, mod ...func(*InPlaceMachine)) InPlaceMachine {
		m := InPlaceMachine{Machine: name, Node: name + "-node", DataSecretName: oldUD, Version: "v1.36.3", UpdatedAt: t0.Add(-time.Hour)}
		for _, f := range mod {
			f(&m)
		}
		return m
	}
	updated := func(m *InPlaceMachine) { m.DataSecretName = newUD }
	draining := func(pods int, blocked string) func(*InPlaceMachine) {
		return func(m *InPlaceMachine) {
			m.Phase, m.StartedAt, m.Unschedulable, m.PodsLeft, m.DrainBlocked = nodepoolv1.UpdatePhaseDraining, t0.Add(-time.Minute), true, pods, blocked
		}
	}
	updating := func(desired, current, state, msg string) func(*InPlaceMachine) {
		return func(m *InPlaceMachine) {
			m.Phase, m.Unschedulable = nodepoolv1.UpdatePhaseUpdating, true
			m.Desired, m.Current, m.State, m.Message = desired, current, state, msg
		}
	}
	for _, tc := range []struct {
		name         string
		machines     []InPlaceMachine
		max          int32
		drainTimeout time.Duration
		forcedAt     *time.Time
		want         []string // "Step machine [payload]"
		reason       string   // of UpdatingConfig, "" for unchanged
		message      string   // substring of UpdatingConfig's message
	}{
		{name: "an owner change starts maxUnavailable nodes, in name order",
			machines: []InPlaceMachine{machine("c"), machine("a"), machine("b")}, max: 2,
			want: []string{"Start a", "Start b"}},
		{name: "nodes being updated count against maxUnavailable",
			machines: []InPlaceMachine{machine("a", updating("p-new", "p-old", nodepoolv1.UpdateStateWorking, "")), machine("b")}, max: 1,
			message: "node a-node: Working"},
		{name: "a node cordoned by someone else uses up maxUnavailable",
			machines: []InPlaceMachine{machine("a", updated, func(m *InPlaceMachine) { m.Unschedulable = true }), machine("b")}, max: 1,
			message: "1 nodes already unavailable"},
		{name: "a cordoned node that is due is updated in its own slot",
			machines: []InPlaceMachine{machine("a", func(m *InPlaceMachine) { m.Unschedulable = true }), machine("b")}, max: 1,
			want: []string{"Start a"}},
		{name: "a cordoned node that is due is updated in its own slot, not twice counted",
			machines: []InPlaceMachine{machine("a", func(m *InPlaceMachine) { m.Unschedulable = true }), machine("b"), machine("c")}, max: 2,
			want: []string{"Start a", "Start b"}},
		{name: "an unavailable node on the target leaves fewer slots",
			machines: []InPlaceMachine{machine("a", updated, func(m *InPlaceMachine) { m.Unschedulable = true }), machine("b"), machine("c")}, max: 2,
			want: []string{"Start b"}},
		{name: "a machine without a Node yet waits for it",
			machines: []InPlaceMachine{machine("a", func(m *InPlaceMachine) { m.Node = "" })}, max: 1},
		{name: "machines on the target are not touched",
			machines: []InPlaceMachine{machine("a", updated), machine("b", updated)}, max: 2},
		{name: "a drained node is asked for the target token's payload",
			machines: []InPlaceMachine{machine("a", draining(0, ""))}, max: 1,
			want: []string{"Request a p-new"}},
		{name: "a PodDisruptionBudget holds the drain, is reported, and the drain is tried again",
			machines: []InPlaceMachine{machine("a", draining(1, "eviction of pod default/web refused: Cannot evict pod as it would violate the pod's disruption budget."))}, max: 1,
			want: []string{"Drain a"}, reason: nodepoolv1.ReasonDrainBlocked, message: "disruption budget"},
		{name: "past the drain timeout the node is updated anyway",
			machines: []InPlaceMachine{machine("a", draining(1, "refused"))}, max: 1, drainTimeout: 30 * time.Second,
			want: []string{"Request a p-new"}},
		{name: "a node done on the desired payload is finished and the next one starts",
			machines: []InPlaceMachine{machine("a", updating("p-new", "p-new", nodepoolv1.UpdateStateDone, "")), machine("b")}, max: 1,
			want: []string{"Finish a", "Start b"}},
		{name: "a Degraded node stops the update: nothing else starts or advances",
			machines: []InPlaceMachine{
				machine("a", updating("p-new", "p-old", nodepoolv1.UpdateStateDegraded, "disk full")),
				machine("b", draining(0, "")), machine("c")}, max: 3,
			reason: nodepoolv1.ReasonNodeUpdateDegraded, message: "node a-node: disk full"},
		{name: "a node asked for an older payload is asked again for the current one",
			machines: []InPlaceMachine{machine("a", updating("p-older", "p-old", nodepoolv1.UpdateStateWorking, ""))}, max: 1,
			want: []string{"Request a p-new"}},
		{name: "a forced rollout updates machines updated before its time",
			machines: []InPlaceMachine{machine("a", updated), machine("b", updated, func(m *InPlaceMachine) { m.UpdatedAt = t0 })}, max: 2,
			forcedAt: ptrTime(t0.Add(-time.Second)),
			want:     []string{"Start a"}},
		{name: "a node agent that never answers holds the update as Degraded and keeps its slot",
			machines: []InPlaceMachine{machine("a", updating("p-new", "", "", ""), func(m *InPlaceMachine) { m.RequestedAt = t0.Add(-time.Hour) }), machine("b")}, max: 2,
			reason: nodepoolv1.ReasonNodeUpdateDegraded, message: "node a-node: its node agent has not finished the update within 30m0s"},
		{name: "a node agent still within its time is waited for",
			machines: []InPlaceMachine{machine("a", updating("p-new", "", nodepoolv1.UpdateStateWorking, ""), func(m *InPlaceMachine) { m.RequestedAt = t0.Add(-time.Minute) })}, max: 1,
			message: "node a-node: Working"},
		{name: "a Done node whose current payload is still old is not finished",
			machines: []InPlaceMachine{machine("a", updating("p-new", "p-old", nodepoolv1.UpdateStateDone, ""))}, max: 1,
			message: "node a-node: Done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers"}}, Now: t0, Settings: Settings{NodeAgentTimeout: 30 * time.Minute},
				InPlace: &InPlace{Machines: tc.machines, MaxUnavailable: tc.max, DrainTimeout: tc.drainTimeout}}
			p := Plan{
				Tokens:            []TokenAction{{Name: tokenName, RolloutHash: "new", PayloadHash: "p-new"}},
				MachineDeployment: &MachineDeploymentTarget{DataSecretName: newUD, Version: "v1.36.3", RolloutAfter: tc.forcedAt},
				Conditions: []metav1.Condition{{Type: nodepoolv1.ConditionUpdatingConfig, Status: metav1.ConditionTrue,
					Reason: nodepoolv1.ReasonRolloutInProgress, Message: "rolling out configuration new"}},
			}
			planInPlace(in, target, &p).explain(&p.Conditions[0])
			var got []string
			for _, a := range p.NodeActions {
				s := string(a.Step) + " " + a.Machine
				if a.Step == StepRequest {
					s += " " + a.Payload
				}
				got = append(got, s)
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("actions %v, want %v", got, tc.want)
			}
			c := p.Conditions[0]
			if tc.reason != "" && c.Reason != tc.reason {
				t.Errorf("UpdatingConfig reason %s, want %s (%s)", c.Reason, tc.reason, c.Message)
			}
			if !strings.Contains(c.Message, tc.message) {
				t.Errorf("UpdatingConfig message %q, want it to mention %q", c.Message, tc.message)
			}
			if p.InPlaceToken != tokenName || p.InPlaceTarget != newUD {
				t.Errorf("token %q target %q, want %q %q", p.InPlaceToken, p.InPlaceTarget, tokenName, newUD)
			}
			for _, a := range p.NodeActions {
				if a.Step == StepFinish && (a.DataSecretName != newUD || !a.Uncordon) {
					t.Errorf("finish %+v, want it recorded on %s and uncordoned", a, newUD)
				}
			}
		})
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// inPlaceSettled is settled for an InPlace pool whose 3 machines run the
// target, each with a Node.
func inPlaceSettled(t *testing.T, w *inputstest.World) Input {
	t.Helper()
	w.Pool.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
	in := settled(t, w)
	ud := in.MachineDeployment.DataSecretName
	in.InPlace = &InPlace{MaxUnavailable: 1}
	for _, name := range []string{"m1", "m2", "m3"} {
		in.InPlace.Machines = append(in.InPlace.Machines, InPlaceMachine{Machine: name, Node: name,
			DataSecretName: ud, Version: in.MachineDeployment.Version, UpdatedAt: t0.Add(-time.Hour),
			Current: in.Latest.Hash, State: nodepoolv1.UpdateStateDone})
	}
	return in
}

func TestInPlaceDecisions(t *testing.T) {
	t.Run("an owner change updates nodes in place, one at a time", func(t *testing.T) {
		w := inputstest.New()
		in := inPlaceSettled(t, w)
		w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
		p := Decide(relatest(t, in, w))
		if len(p.NodeActions) != 1 || p.NodeActions[0].Step != StepStart || p.NodeActions[0].Machine != "m1" {
			t.Fatalf("node actions %+v, want m1 started", p.NodeActions)
		}
		if p.Record == nil || p.Record.Initiator != InitiatorSpec {
			t.Errorf("record %+v, want a spec rollout", p.Record)
		}
		if p.MachineDeployment == nil || p.MachineDeployment.DataSecretName == in.MachineDeployment.DataSecretName {
			t.Error("the MachineSet template must move to the new user-data, so new machines boot it")
		}
	})
	t.Run("management drift does not update nodes in place", func(t *testing.T) {
		w := inputstest.New()
		in := inPlaceSettled(t, w)
		bumpProxyImage(w)
		p := Decide(relatest(t, in, w))
		if len(p.NodeActions) != 0 || p.Record != nil {
			t.Fatalf("node actions %+v, record %+v: want none", p.NodeActions, p.Record)
		}
		if len(p.Pending) != 1 || p.Pending[0].Component != "apiserver-proxy" {
			t.Errorf("pending %+v, want the drift reported", p.Pending)
		}
	})
	t.Run("management drift under the Rollout policy updates nodes in place", func(t *testing.T) {
		w := inputstest.New()
		in := inPlaceSettled(t, w)
		bumpProxyImage(w)
		w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
		in = relatest(t, in, w)
		in.Pool.Status.PendingManagementChanges = nil
		p := Decide(in)
		// The drift is seen now; the policy rolls it from the time it was
		// first seen, on the next reconcile.
		in.Pool.Status.PendingManagementChanges = p.Pending
		in.Now = in.Now.Add(time.Second)
		p = Decide(in)
		if p.Record == nil || p.Record.Initiator != InitiatorPolicy || len(p.NodeActions) != 1 || p.NodeActions[0].Step != StepStart {
			t.Fatalf("record %+v, node actions %+v: want a policy rollout starting m1", p.Record, p.NodeActions)
		}
	})
	t.Run("a paused pool starts no in-place update", func(t *testing.T) {
		w := inputstest.New()
		in := inPlaceSettled(t, w)
		w.UserConfigs[0].Data[inputs.ConfigKey] = strings.Replace(inputstest.ChronyConfig, "time.corp", "ntp.corp", 1)
		w.Pool.Spec.Management.PausedUntil = "true"
		p := Decide(relatest(t, in, w))
		if len(p.NodeActions) != 0 {
			t.Fatalf("node actions %+v, want none while paused", p.NodeActions)
		}
	})
}
