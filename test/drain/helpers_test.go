package drain

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/stack"
)

// newLoadedPool is a pool of n machines whose nodes run workloads (the
// sim's spec.workloads, such as "guarded,bare,slow=30s"); edit may change
// the pool before it is created.
func newLoadedPool(t *testing.T, n int32, workloads string, edit func(*nodepoolv1.NodePool)) *nodepoolv1.NodePool {
	t.Helper()
	return st.NewPoolWith(t, "workers", n, func(ns string, p *nodepoolv1.NodePool) {
		if err := simtest.CreateMachineTemplate(context.Background(), env.Client, ns, "loaded", simv1.SimMachineSpec{Workloads: workloads}); err != nil {
			t.Fatal(err)
		}
		p.Spec.InfrastructureTemplateRef = stack.TemplateRef("loaded")
		if edit != nil {
			edit(p)
		}
	})
}

// changeChrony starts a rollout: an owner change of the pool's config.
func changeChrony(t *testing.T, p *nodepoolv1.NodePool, server string) {
	t.Helper()
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony(server) })
}

// pods lists the namespace's pods by name, with their node and whether
// they are terminating.
func pods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

func describePods(ps map[string]corev1.Pod) string {
	var out []string
	for name, p := range ps {
		s := fmt.Sprintf("%s@%s:%s", name, p.Spec.NodeName, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += "(terminating)"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitForPods waits until ok holds for the namespace's pods.
func waitForPods(t *testing.T, ns string, timeout time.Duration, what string, ok func(map[string]corev1.Pod) bool) map[string]corev1.Pod {
	t.Helper()
	return stack.WaitFor(t, timeout, what, func() map[string]corev1.Pod { return pods(t, ns) }, ok, describePods)
}

// running reports whether every named pod runs, Ready, on a node.
func running(ps map[string]corev1.Pod, names ...string) bool {
	for _, n := range names {
		p, ok := ps[n]
		if !ok || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

// machines lists the pool's Machines, oldest first.
func machines(t *testing.T, p *nodepoolv1.NodePool) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) ||
			list.Items[i].CreationTimestamp.Equal(&list.Items[j].CreationTimestamp) && list.Items[i].Name < list.Items[j].Name
	})
	return list.Items
}

// hasMachine reports whether the pool has a Machine of that name, deleting
// or not.
func hasMachine(t *testing.T, p *nodepoolv1.NodePool, name string) bool {
	for _, m := range machines(t, p) {
		if m.Name == name {
			return true
		}
	}
	return false
}

// deletingMessage is the message of a Machine's Deleting condition.
func deletingMessage(m clusterv1.Machine) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition); c != nil && c.Status == "True" {
		return c.Message
	}
	return ""
}

// releaseBudget lets the guarded pods of ns be evicted one at a time.
func releaseBudget(t *testing.T, ns string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	pdb.Namespace, pdb.Name = ns, sim.GuardedBudget
	stack.Update(t, env.Client, pdb, func(b *policyv1.PodDisruptionBudget) {
		b.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
}

// kubectl runs `kubectl nodepool -n ns args...` in-process against the
// stack and returns what it printed and its exit code.
func kubectl(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cli.Run(context.Background(), streams, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
	return out.String() + errOut.String(), code
}

// policy sets spec.management.drain.
func policy(on nodepoolv1.DrainTimeoutPolicy, timeout time.Duration) func(*nodepoolv1.NodePool) {
	return func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Drain = &nodepoolv1.Drain{OnTimeout: on, Timeout: &metav1.Duration{Duration: timeout}}
	}
}

// inPlace makes a pool InPlace, one node at a time.
func inPlace(p *nodepoolv1.NodePool) {
	p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
	p.Spec.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt32(1))
}

// events are the pool's events of reason, by message.
func events(t *testing.T, p *nodepoolv1.NodePool, reason string) []string {
	return stack.PoolEvents(t, env.Client, p, reason)
}

// gauge is the value of a series the controller exports (it runs in this
// process), -1 when there is none.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if v, ok := stack.Metric(t, name, labels); ok {
		return v
	}
	return -1
}

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }
