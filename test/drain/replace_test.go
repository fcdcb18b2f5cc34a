package drain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/stack"
)

// drainTimeout is the policy's timeout in these tests: its lower bound.
const drainTimeout = 30 * time.Second

// Cluster API drains the node of a Machine it deletes through the Eviction
// API: the sim's pods go, a slow one after its grace period, and a budget
// that allows no disruption holds the node. With onTimeout Wait the pool
// says so live (status.drains, rollout status, an event once the timeout
// passed, the blocked-nodes metric), naming the pod and the budget, and
// waits until the budget allows an eviction.
func TestAReplaceDrainBlockedByABudgetIsReportedLiveAndWaitsForIt(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded,bare,slow=5s,daemon", policy(nodepoolv1.DrainWait, drainTimeout))
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	old := machines(t, p)[0]
	name := func(kind string) string { return old.Spec.InfrastructureRef.Name + "-" + kind }
	guarded := p.Namespace + "/" + name("guarded")
	waitForPods(t, p.Namespace, time.Minute, "the workload pods running on the node", func(ps map[string]corev1.Pod) bool {
		return running(ps, name("guarded"), name("bare"), name("slow"), name("daemon"))
	})

	changeChrony(t, p, "drain.corp.example")
	waitForPods(t, p.Namespace, stack.RolloutTimeout, "the old node drained but for the guarded pod (the daemon's is skipped)", func(ps map[string]corev1.Pod) bool {
		_, bare := ps[name("bare")]
		_, slow := ps[name("slow")]
		return !bare && !slow && running(ps, name("guarded"), name("daemon"))
	})
	s := st.WaitForPool(t, p, stack.RolloutTimeout, "status.drains naming the node, the guarded pod and its budget, blocked after the timeout", func(s stack.PoolState) bool {
		for _, d := range s.Pool.Status.Drains {
			if d.Machine == old.Name && d.Blocked && len(d.Pods) == 1 && d.Pods[0].Pod == guarded && d.Pods[0].Budget == sim.GuardedBudget {
				return true
			}
		}
		return false
	})
	node := s.Pool.Status.Drains[0].Node
	if got := events(t, p, nodepoolv1.EventDrainBlocked); len(got) != 1 || !strings.Contains(got[0], node) || !strings.Contains(got[0], guarded) ||
		!strings.Contains(got[0], "PodDisruptionBudget "+sim.GuardedBudget) || !strings.Contains(got[0], "onTimeout Wait") {
		t.Errorf("DrainBlocked events = %q, want one naming node %s, pod %s and its budget", got, node, guarded)
	}
	if v := gauge(t, "nodepool_drain_blocked_nodes", map[string]string{"namespace": p.Namespace, "pool": p.Name, "on_timeout": "Wait"}); v != 1 {
		t.Errorf("nodepool_drain_blocked_nodes = %v, want 1", v)
	}
	out, code := kubectl(t, p.Namespace, "rollout", "status", "--watch=false", "workers")
	if code != 0 || !strings.Contains(out, "draining node "+node) || !strings.Contains(out, "(blocked), held by pod "+guarded+" (PodDisruptionBudget "+sim.GuardedBudget+")") {
		t.Errorf("rollout status (exit %d) does not say which pod holds which node:\n%s", code, out)
	}
	t.Logf("rollout status:\n%s", out)
	st.HoldsFor(t, p, 3*time.Second, "the old machine held", func(stack.PoolState) bool { return hasMachine(t, p, old.Name) })

	releaseBudget(t, p.Namespace)
	st.WaitForPool(t, p, stack.RolloutTimeout, "the old machine gone once the budget allows an eviction, and no drain left", func(s stack.PoolState) bool {
		return !hasMachine(t, p, old.Name) && stack.PoolSettled(1)(s) && len(s.Pool.Status.Drains) == 0
	})
	if v := gauge(t, "nodepool_drain_blocked_nodes", map[string]string{"namespace": p.Namespace, "pool": p.Name}); v != 0 {
		t.Errorf("nodepool_drain_blocked_nodes = %v after the drain, want 0", v)
	}
}

// With onTimeout Force, Cluster API's nodeDrainTimeout is the policy's
// timeout: the blocked node goes after it, its guarded pod with it.
func TestAReplaceDrainBlockedByABudgetIsForcedAfterTheTimeout(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded", policy(nodepoolv1.DrainForce, drainTimeout))
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	old := machines(t, p)[0]
	if got := old.Spec.Deletion.NodeDrainTimeoutSeconds; got == nil || *got != int32(drainTimeout/time.Second) {
		t.Errorf("the Machine's nodeDrainTimeoutSeconds = %v, want %d", got, drainTimeout/time.Second)
	}
	changeChrony(t, p, "force.corp.example")
	st.WaitForPool(t, p, stack.RolloutTimeout+drainTimeout, "the old machine gone with its budget still refusing", func(s stack.PoolState) bool {
		return !hasMachine(t, p, old.Name) && stack.PoolSettled(1)(s)
	})
	// Cluster API may force the node at the moment the controller would
	// say it is blocked: the controller then says it once the machine is
	// gone, and the event is written after the status that shows it.
	stack.WaitFor(t, time.Minute, "one DrainBlocked event saying it forces", func() []string { return events(t, p, nodepoolv1.EventDrainBlocked) },
		func(got []string) bool { return len(got) >= 1 }, func(got []string) string { return fmt.Sprintf("events %q", got) })
	if got := events(t, p, nodepoolv1.EventDrainBlocked); len(got) != 1 || !strings.Contains(got[0], "forcing it (onTimeout Force)") {
		t.Errorf("DrainBlocked events = %q, want one saying it forces", got)
	}
}

// With onTimeout Halt the rollout halts as a failed health gate would:
// RolloutHealthy False naming the pod and budget, the MachineDeployment
// paused, the node and its pod kept; a resume lets it go on.
func TestAReplaceDrainBlockedByABudgetHaltsTheRolloutAndKeepsTheNode(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded", policy(nodepoolv1.DrainHalt, drainTimeout))
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	old := machines(t, p)[0]
	guarded := old.Spec.InfrastructureRef.Name + "-guarded"
	changeChrony(t, p, "halt.corp.example")
	s := st.WaitForPool(t, p, stack.RolloutTimeout+drainTimeout, "the rollout halted on the drain", func(s stack.PoolState) bool {
		c := meta.FindStatusCondition(s.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
		return c != nil && c.Status == "False" && c.Reason == nodepoolv1.ReasonDrainHalted
	})
	c := meta.FindStatusCondition(s.Pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
	if !strings.Contains(c.Message, p.Namespace+"/"+guarded) || !strings.Contains(c.Message, sim.GuardedBudget) || !strings.Contains(c.Message, old.Name) {
		t.Errorf("RolloutHealthy says %q, want the machine, pod and budget named", c.Message)
	}
	md := &clusterv1.MachineDeployment{}
	stack.WaitFor(t, time.Minute, "the MachineDeployment paused", func() *clusterv1.MachineDeployment {
		md.Namespace, md.Name = p.Namespace, p.Name
		if err := env.Client.Get(t.Context(), clientKey(md), md); err != nil {
			t.Fatal(err)
		}
		return md
	}, func(md *clusterv1.MachineDeployment) bool { return md.Annotations[clusterv1.PausedAnnotation] != "" },
		func(md *clusterv1.MachineDeployment) string { return fmt.Sprintf("annotations %v", md.Annotations) })
	out, code := kubectl(t, p.Namespace, "rollout", "status", "--watch=false", "workers")
	if code == 0 || !strings.Contains(out, nodepoolv1.ReasonDrainHalted) {
		t.Errorf("rollout status (exit %d) does not fail on the halt:\n%s", code, out)
	}
	st.HoldsFor(t, p, 5*time.Second, "the old machine and its guarded pod kept", func(stack.PoolState) bool {
		_, ok := pods(t, p.Namespace)[guarded]
		return hasMachine(t, p, old.Name) && ok
	})
	if _, code := kubectl(t, p.Namespace, "rollout", "resume", "workers"); code != 0 {
		t.Fatalf("rollout resume: exit %d", code)
	}
	releaseBudget(t, p.Namespace)
	st.WaitForPool(t, p, stack.RolloutTimeout, "the rollout finished once resumed and the budget allows it", func(s stack.PoolState) bool {
		return !hasMachine(t, p, old.Name) && stack.PoolSettled(1)(s)
	})
}
