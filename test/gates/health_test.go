package gates

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/stack"
)

// healthPool is a pool of n machines with spec.management.health.
func healthPool(t *testing.T, n int32, h nodepoolv1.Health) *nodepoolv1.NodePool {
	t.Helper()
	return st.NewPoolWith(t, "workers", n, func(_ string, p *nodepoolv1.NodePool) { p.Spec.Management.Health = &h })
}

// rollOutBadPayload adds a user config whose nodes turn NotReady 5s after
// they boot: an owner change to a bad payload.
func rollOutBadPayload(t *testing.T, p *nodepoolv1.NodePool) {
	t.Helper()
	st.MustCreate(t, stack.ConfigMap(p.Namespace, "bad", sim.FailAfterConfig(5*time.Second)))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = append(p.Spec.Config, nodepoolv1.LocalObjectReference{Name: "bad"})
	})
}

// poolMachines lists the pool's Machines in one List, oldest first.
func poolMachines(t *testing.T, p *nodepoolv1.NodePool) []clusterv1.Machine {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(ms.Items, func(i, j int) bool {
		return ms.Items[i].CreationTimestamp.Before(&ms.Items[j].CreationTimestamp)
	})
	return ms.Items
}

func gateOf(m *clusterv1.Machine) *metav1.Condition {
	return meta.FindStatusCondition(m.Status.Conditions, nodepoolv1.HealthGateCondition)
}

func TestACanaryOnABadPayloadHaltsTheRolloutAndTouchesNoOtherMachine(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthPool(t, 3, nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Second}})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes, every gate True", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && gatesTrue(t, p) == 3
	})
	rollOutBadPayload(t, p)
	halted := st.WaitForPool(t, p, stack.RolloutTimeout, "RolloutHealthy False, RolloutHalted, naming the canary", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted && strings.Contains(c.Message, "Ready=False")
	})
	st.HoldsFor(t, p, 20*time.Second, "the 3 old machines kept, exactly one new machine", func(s stack.PoolState) bool {
		return s.Machines.IsSuperset(before.Machines) && s.Machines.Len() == 4
	})
	var failed []string
	for _, m := range poolMachines(t, p) {
		if before.Machines.Has(string(m.UID)) {
			if g := gateOf(&m); g == nil || g.Status != metav1.ConditionTrue {
				t.Errorf("old machine %s has gate %v, want True", m.Name, g)
			}
			continue
		}
		if g := gateOf(&m); g == nil || g.Status != metav1.ConditionFalse || g.Reason != nodepoolv1.GateReasonFailed {
			t.Errorf("canary %s has gate %v, want False/%s", m.Name, g, nodepoolv1.GateReasonFailed)
		}
		failed = append(failed, m.Name)
	}
	c := stack.Condition(halted.Pool, nodepoolv1.ConditionRolloutHealthy)
	if len(failed) != 1 || !strings.Contains(c.Message, failed[0]) {
		t.Errorf("RolloutHealthy %q does not name the one new machine %v", c.Message, failed)
	}
	t.Logf("halted: %s", c.Message)

	// A new owner change supersedes the halted rollout.
	st.MustCreate(t, stack.ConfigMap(p.Namespace, "chrony2", stack.Chrony("ntp.corp.example")))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "chrony2"}}
		p.Spec.Management.Health.CanarySoak = &metav1.Duration{Duration: time.Second}
	})
	st.WaitForPool(t, p, 3*stack.RolloutTimeout, "every machine replaced by a healthy one, RolloutHealthy True", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && stack.IsTrue(s.Pool, nodepoolv1.ConditionRolloutHealthy)
	})
}

// gatesTrue counts the pool's machines whose health gate is True.
func gatesTrue(t *testing.T, p *nodepoolv1.NodePool) int {
	t.Helper()
	n := 0
	for _, m := range poolMachines(t, p) {
		if g := gateOf(&m); g != nil && g.Status == metav1.ConditionTrue {
			n++
		}
	}
	return n
}

func TestRollbackReturnsEveryMachineToThePreviousPayloadAndRecordsIt(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := healthPool(t, 3, nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}, FailurePolicy: nodepoolv1.FailurePolicyRollback})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", func(s stack.PoolState) bool { return stack.PoolSettled(3)(s) && gatesTrue(t, p) == 3 })
	rollOutBadPayload(t, p)
	st.WaitForPool(t, p, stack.RolloutTimeout, "RolloutHealthy False, RollingBack", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRollingBack
	})
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine on the previous payload, the failed machine gone", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.OnlyPayload() == before.OnlyPayload() && s.Machines.Len() == 3
	})
	if !after.Machines.Equal(before.Machines) {
		t.Errorf("the rollback replaced machines that ran the previous payload: before %v, after %v", sets.List(before.Machines), sets.List(after.Machines))
	}
	c := stack.Condition(after.Pool, nodepoolv1.ConditionRolloutHealthy)
	if c.Status != metav1.ConditionFalse || c.Reason != nodepoolv1.ReasonRolloutHalted {
		t.Errorf("after the rollback RolloutHealthy = %s/%s (%s), want False/%s", c.Status, c.Reason, c.Message, nodepoolv1.ReasonRolloutHalted)
	}
	entries := st.HistoryOf(t, p)
	if len(entries) != 3 {
		t.Fatalf("history has %d revisions, want 3 (create, the failed rollout, the rollback): %+v", len(entries), entries)
	}
	failed, back := entries[1], entries[2]
	if failed.Outcome != history.OutcomeFailed {
		t.Errorf("revision %d outcome %q, want %s", failed.Revision, failed.Outcome, history.OutcomeFailed)
	}
	if back.Initiator != string(rollout.InitiatorRollback) || back.RollbackOf != failed.Revision || back.RolloutHash != entries[0].RolloutHash {
		t.Errorf("revision %d = initiator %q rollbackOf %d hash %s, want rollback of %d to %s", back.Revision, back.Initiator, back.RollbackOf, back.RolloutHash, failed.Revision, entries[0].RolloutHash)
	}
	if back.Outcome != history.OutcomeComplete {
		t.Errorf("the rollback's outcome is %q, want %s", back.Outcome, history.OutcomeComplete)
	}
	st.HoldsFor(t, p, 10*time.Second, "the failed configuration is not tried again", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines)
	})
}

func TestAHealthyGatedRolloutSoaksEveryMachineWithinTheSurgeBounds(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	const canarySoak, soak = 8 * time.Second, 4 * time.Second
	p := healthPool(t, 3, nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)),
		CanarySoak: &metav1.Duration{Duration: canarySoak}, Soak: &metav1.Duration{Duration: soak}})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", func(s stack.PoolState) bool { return stack.PoolSettled(3)(s) && gatesTrue(t, p) == 3 })
	st.MustCreate(t, stack.ConfigMap(p.Namespace, "chrony2", stack.Chrony("ntp.corp.example")))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "chrony2"}} })

	// maxSurge 1, maxUnavailable 0 (the defaults): at every sample at most
	// 4 machines exist and at least 3 are available.
	samples, most, fewest := 0, 0, 3
	deadline := time.Now().Add(3 * stack.RolloutTimeout)
	for {
		ms := poolMachines(t, p)
		live, available := 0, 0
		for _, m := range ms {
			if !m.DeletionTimestamp.IsZero() {
				continue
			}
			live++
			if meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.AvailableCondition) {
				available++
			}
		}
		samples++
		most, fewest = max(most, live), min(fewest, available)
		if live > 4 || available < 3 {
			t.Fatalf("sample %d: %d machines, %d available; maxSurge 1 and maxUnavailable 0 allow at most 4 and at least 3", samples, live, available)
		}
		if s := st.Observe(t, p); stack.PoolSettled(3)(s) && s.Machines.Intersection(before.Machines).Len() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollout did not complete: %s", st.Observe(t, p))
		}
		time.Sleep(300 * time.Millisecond)
	}
	ms := poolMachines(t, p)
	if len(ms) != 3 {
		t.Fatalf("%d machines after the rollout", len(ms))
	}
	for i, m := range ms {
		t.Logf("machine %d %s created %s gate %v", i, m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339), gateOf(&m))
	}
	var passed []time.Time
	for i, m := range ms {
		g := gateOf(&m)
		if g == nil || g.Status != metav1.ConditionTrue || g.Reason != nodepoolv1.GateReasonSoaked {
			t.Fatalf("machine %s gate %v, want True/%s", m.Name, g, nodepoolv1.GateReasonSoaked)
		}
		want := soak
		if i == 0 {
			want = canarySoak
		}
		if took := g.LastTransitionTime.Sub(m.CreationTimestamp.Time); took < want {
			t.Errorf("machine %d (%s) passed %s after its creation, before its soak of %s", i, m.Name, took, want)
		}
		passed = append(passed, g.LastTransitionTime.Time)
	}
	minimum := canarySoak + 2*soak
	if took := passed[2].Sub(ms[0].CreationTimestamp.Time); took < minimum {
		t.Errorf("the rollout took %s from the first new machine to the last gate, less than canarySoak + 2 × soak = %s", took, minimum)
	} else {
		t.Logf("rollout: %s from the first new machine to the last gate (at least %s); %d samples, at most %d machines, at least %d available", took, minimum, samples, most, fewest)
	}
}

func TestAMachineThatNeverBootsExceedsTheProgressDeadline(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	const deadline = 15 * time.Second
	p := healthPool(t, 2, nodepoolv1.Health{ProgressDeadline: &metav1.Duration{Duration: deadline}})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", func(s stack.PoolState) bool { return stack.PoolSettled(2)(s) && gatesTrue(t, p) == 2 })
	if err := simtest.CreateMachineTemplate(context.Background(), env.Client, p.Namespace, "broken", simv1.SimMachineSpec{FailBoot: true}); err != nil {
		t.Fatal(err)
	}
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.InfrastructureTemplateRef = stack.TemplateRef("broken") })
	s := st.WaitForPool(t, p, stack.RolloutTimeout, "RolloutHealthy False, ProgressDeadlineExceeded", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonProgressDeadlineExceeded
	})
	c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
	var created time.Time
	for _, m := range poolMachines(t, p) {
		if !before.Machines.Has(string(m.UID)) {
			created = m.CreationTimestamp.Time
			if !strings.Contains(c.Message, m.Name) {
				t.Errorf("RolloutHealthy %q does not name the new machine %s", c.Message, m.Name)
			}
		}
	}
	late := c.LastTransitionTime.Sub(created.Add(deadline))
	// Condition times have second precision; one reconcile is at most
	// the rollout poll interval.
	if late < -time.Second || late > rollout.RolloutPollInterval+time.Second {
		t.Errorf("reported %s after the deadline, want within one reconcile (%s)", late, rollout.RolloutPollInterval)
	}
	t.Logf("progress deadline reported %s after it passed: %s", late, c.Message)
	st.HoldsFor(t, p, 5*time.Second, "the old machines kept", func(s stack.PoolState) bool { return s.Machines.IsSuperset(before.Machines) })
}

func TestEnablingTheHealthGateReplacesNoMachine(t *testing.T) {
	t.Parallel() // its own namespace and pools; no shared setting changes
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.Health = &nodepoolv1.Health{} })
	st.WaitForPool(t, p, stack.RolloutTimeout, "every machine gated, its gate True, the pool ready", func(s stack.PoolState) bool {
		gated := 0
		for _, m := range poolMachines(t, p) {
			if len(m.Spec.ReadinessGates) == 1 && m.Spec.ReadinessGates[0].ConditionType == nodepoolv1.HealthGateCondition {
				gated++
			}
		}
		return gated == 2 && gatesTrue(t, p) == 2 && stack.PoolSettled(2)(s) && stack.IsTrue(s.Pool, nodepoolv1.ConditionRolloutHealthy)
	})
	st.HoldsFor(t, p, 10*time.Second, "no machine replaced", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.Health = nil })
	st.WaitForPool(t, p, stack.RolloutTimeout, "the gate gone from every machine", func(s stack.PoolState) bool {
		for _, m := range poolMachines(t, p) {
			if len(m.Spec.ReadinessGates) != 0 {
				return false
			}
		}
		return stack.PoolSettled(2)(s)
	})
	st.HoldsFor(t, p, 5*time.Second, "no machine replaced", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
}
