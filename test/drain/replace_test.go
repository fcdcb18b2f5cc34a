package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/stack"
)

// Cluster API drains the node of a Machine it deletes through the Eviction
// API: the sim's pods go, a slow one after its grace period, and a budget
// that allows no disruption holds the node, named in the Machine's
// Deleting condition, until it allows one.
func TestAReplaceRolloutDrainsThroughTheEvictionAPIAndWaitsOnABudget(t *testing.T) {
	p := newLoadedPool(t, 1, "guarded,bare,slow=5s,daemon", nil)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	old := machines(t, p)[0]
	name := func(kind string) string { return old.Spec.InfrastructureRef.Name + "-" + kind }
	waitForPods(t, p.Namespace, time.Minute, "the workload pods running on the node", func(ps map[string]corev1.Pod) bool {
		return running(ps, name("guarded"), name("bare"), name("slow"), name("daemon"))
	})

	changeChrony(t, p, "drain.corp.example")
	ps := waitForPods(t, p.Namespace, stack.RolloutTimeout, "the old node drained but for the guarded pod", func(ps map[string]corev1.Pod) bool {
		_, bare := ps[name("bare")]
		_, slow := ps[name("slow")]
		return !bare && !slow && running(ps, name("guarded"), name("daemon"))
	})
	if _, ok := ps[name("bare")]; ok {
		t.Errorf("the bare pod was not evicted: %s", describePods(ps))
	}
	var msg string
	stack.WaitFor(t, time.Minute, "the old Machine's Deleting condition naming the guarded pod and its budget", func() string {
		for _, m := range machines(t, p) {
			if m.Name == old.Name {
				msg = deletingMessage(m)
			}
		}
		return msg
	}, func(m string) bool {
		return strings.Contains(m, p.Namespace+"/"+name("guarded")) && strings.Contains(m, "disruption budget "+sim.GuardedBudget)
	}, func(m string) string { return m })
	st.HoldsFor(t, p, 3*time.Second, "the old machine held", func(stack.PoolState) bool { return hasMachine(t, p, old.Name) })

	releaseBudget(t, p.Namespace)
	st.WaitForPool(t, p, stack.RolloutTimeout, "the old machine gone once the budget allows an eviction", func(s stack.PoolState) bool {
		return !hasMachine(t, p, old.Name) && stack.PoolSettled(1)(s)
	})
}
