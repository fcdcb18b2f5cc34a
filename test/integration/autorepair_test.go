package integration

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// healthCheck reads the pool's MachineHealthCheck; nil when there is none.
func healthCheck(t *testing.T, p *nodepoolv1.NodePool) *clusterv1.MachineHealthCheck {
	t.Helper()
	mhc := &clusterv1.MachineHealthCheck{}
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), mhc)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return mhc
}

// makeUnhealthy sets spec.unhealthy on the SimMachine of one of the pool's
// machines (its Node turns NotReady) and returns that Machine's UID.
func makeUnhealthy(t *testing.T, p *nodepoolv1.NodePool) string {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(ms.Items) == 0 {
		t.Fatal("the pool has no machine")
	}
	m := ms.Items[0]
	sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: m.Spec.InfrastructureRef.Name}}
	stack.Update(t, env.Client, sm, func(sm *simv1.SimMachine) { sm.Spec.Unhealthy = true })
	return string(m.UID)
}

func TestAutoRepairReplacesAnUnhealthyMachineWithoutARollout(t *testing.T) {
	p := st.NewPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{UnhealthyTimeout: &metav1.Duration{Duration: 3 * time.Second}}
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	mhc := healthCheck(t, p)
	if mhc == nil || !metav1.IsControlledBy(mhc, before.Pool) {
		t.Fatalf("no MachineHealthCheck owned by the pool: %+v", mhc)
	}
	if got := mhc.Spec.Selector.MatchLabels[nodepoolv1.LabelPool]; got != p.Name {
		t.Errorf("health check selects pool %q, want %q", got, p.Name)
	}
	if to := mhc.Spec.Checks.NodeStartupTimeoutSeconds; to == nil || *to != 20*60 {
		t.Errorf("nodeStartupTimeoutSeconds %v, want the default 1200", to)
	}
	records := st.HistoryOf(t, p)

	sick := makeUnhealthy(t, p)

	after := st.WaitForPool(t, p, stack.RolloutTimeout, "the unhealthy machine replaced by the health check", func(s stack.PoolState) bool {
		return !s.Machines.Has(sick) && stack.PoolSettled(2)(s)
	})
	if kept := after.Machines.Intersection(before.Machines).Len(); kept != 1 {
		t.Errorf("%d of the healthy machines kept, want 1: only the unhealthy one is replaced", kept)
	}
	if h := st.HistoryOf(t, p); len(h) != len(records) {
		t.Errorf("a repair recorded a rollout: %d records before, %d after", len(records), len(h))
	}

	// Paused with the pool.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = "true" })
	stackWait(t, "the health check paused with the pool", func() bool {
		m := healthCheck(t, p)
		return m != nil && m.Annotations[clusterv1.PausedAnnotation] == "true"
	})
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = "false" })
	stackWait(t, "the health check resumed with the pool", func() bool {
		m := healthCheck(t, p)
		return m != nil && m.Annotations[clusterv1.PausedAnnotation] == ""
	})

	// Turned off: the health check goes, nothing is replaced.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.AutoRepair = nil })
	stackWait(t, "the health check deleted with autoRepair off", func() bool { return healthCheck(t, p) == nil })
	st.HoldsFor(t, p, 5*time.Second, "turning autoRepair off replaces nothing", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
}

func TestDeletingAnAutoRepairPoolDeletesItsHealthCheck(t *testing.T) {
	p := st.NewPoolWith(t, "workers", 1, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	if healthCheck(t, p) == nil {
		t.Fatal("no MachineHealthCheck")
	}
	if err := env.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	stackWait(t, "the pool and its health check gone", func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{})
		return apierrors.IsNotFound(err) && healthCheck(t, p) == nil
	})
}

// stackWait polls cond for up to stack.RolloutTimeout.
func stackWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(stack.RolloutTimeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", stack.RolloutTimeout, what)
}
