package drain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/stack"
)

// planChrony runs `plan -f` with the pool's chrony ConfigMap edited (an
// owner change: a rollout is predicted).
func planChrony(t *testing.T, p *nodepoolv1.NodePool) (string, int) {
	t.Helper()
	data, err := yaml.Marshal(stack.ConfigMap(p.Namespace, "chrony", stack.Chrony("plan.corp.example")))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "chrony.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubectl(t, p.Namespace, "plan", "-f", file)
}

// plan reads the workload cluster and predicts what will block or slow
// the drains of the rollout it predicts, exiting 4 when one blocks; it
// says nothing of drains when nothing on the nodes does.
func TestPlanPredictsABudgetBlockABarePodAndALongGracePeriod(t *testing.T) {
	t.Parallel()
	p := newLoadedPool(t, 1, "guarded,bare,slow=2h,daemon", policy(nodepoolv1.DrainHalt, time.Hour))
	quiet := newLoadedPool(t, 1, "", nil)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	st.WaitForPool(t, quiet, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	m := machines(t, p)[0]
	name := func(kind string) string { return p.Namespace + "/" + m.Spec.InfrastructureRef.Name + "-" + kind }
	waitForPods(t, p.Namespace, time.Minute, "the workload pods running, the budget computed", func(ps map[string]corev1.Pod) bool {
		return len(ps) == 4 && running(ps, strings.TrimPrefix(name("guarded"), p.Namespace+"/"))
	})

	out, code := planChrony(t, p)
	t.Logf("plan:\n%s", out)
	if code != cli.ExitDrainBlocked {
		t.Errorf("plan exit %d, want %d (a drain block predicted)", code, cli.ExitDrainBlocked)
	}
	for _, want := range []string{
		"drain BLOCKS: pod " + name("guarded") + " on node " + m.Status.NodeRef.Name + ": PodDisruptionBudget " + sim.GuardedBudget + " allows no disruption now",
		"drain slows: pod " + name("bare") + " on node " + m.Status.NodeRef.Name + ": no controller owns it",
		"drain BLOCKS: pod " + name("slow") + " on node " + m.Status.NodeRef.Name + ": termination grace period 2h0m0s is longer than the drain timeout 1h0m0s: the rollout halts",
		"drain ignores 1 DaemonSet or static pods",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan does not say %q", want)
		}
	}
	out, code = planChrony(t, quiet)
	if code != 0 || strings.Contains(out, "drain") {
		t.Errorf("plan of a pool whose nodes run nothing: exit %d, says:\n%s", code, out)
	}
}
