package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// ExitDrainBlocked is plan's exit status when it predicts that a drain of
// the rollout it predicts will block (a PodDisruptionBudget that allows no
// disruption now, or a pod whose grace period outlasts a Halt policy's
// timeout).
const ExitDrainBlocked = 4

// PlanDrain is one pod that will block or slow the drain of a node the
// predicted rollout drains.
type PlanDrain struct {
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Budget string `json:"budget,omitempty"`
	// Blocks is true when the drain is predicted to stop on it; otherwise
	// it slows the drain or loses something.
	Blocks bool   `json:"blocks"`
	Why    string `json:"why"`
}

// readDrainPods reads, from the pool's workload cluster (through the
// Cluster's <cluster>-kubeconfig Secret, read-only), the pods on the nodes
// of the pool's Machines and the PodDisruptionBudgets of their namespaces:
// what the engine predicts the drains of a rollout from
// (rollout.PredictDrains). What it cannot read is a warning, never a
// failure of plan; nil then, or when the pool has no node.
func readDrainPods(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, warnings *[]string) *rollout.DrainPods {
	warn := func(err error) {
		*warnings = append(*warnings, fmt.Sprintf("cannot predict the drains: %v", err))
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		warn(fmt.Errorf("listing the pool's Machines: %w", err))
		return nil
	}
	var nodes []string
	for _, m := range machines.Items {
		if m.DeletionTimestamp.IsZero() && m.Status.NodeRef.IsDefined() {
			nodes = append(nodes, m.Status.NodeRef.Name)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	wc, err := workloadClient(ctx, c, pool)
	if err != nil {
		warn(err)
		return nil
	}
	out := &rollout.DrainPods{}
	namespaces := map[string]bool{}
	for _, n := range nodes {
		list := &corev1.PodList{}
		if err := wc.List(ctx, list, client.MatchingFields{"spec.nodeName": n}); err != nil {
			warn(fmt.Errorf("listing the pods on node %s of the workload cluster: %w", n, err))
			return nil
		}
		for _, p := range list.Items {
			out.Pods = append(out.Pods, p)
			namespaces[p.Namespace] = true
		}
	}
	for _, ns := range sortedKeys(namespaces) {
		list := &policyv1.PodDisruptionBudgetList{}
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			warn(fmt.Errorf("listing the PodDisruptionBudgets of namespace %s of the workload cluster: %w", ns, err))
			return nil
		}
		out.Budgets = append(out.Budgets, list.Items...)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planDrains words what the engine predicts of the rollout's drains
// (Decision.DrainForecast).
func planDrains(r *PlanResult, d rollout.Decision) {
	f := d.DrainForecast
	if f == nil || !r.Rolls {
		return
	}
	for _, risk := range f.Risks {
		r.Drains = append(r.Drains, PlanDrain{Pod: risk.Pod, Node: risk.Node, Budget: risk.Budget, Blocks: risk.Blocks, Why: risk.Why})
	}
	r.DrainIgnored, r.DrainBlocks, r.DrainStall = f.Ignored, f.Blocks(), f.Stall()
}

// workloadClient is a read-only client of the pool's workload cluster,
// built from its Cluster's kubeconfig Secret.
func workloadClient(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) (client.Reader, error) {
	key := client.ObjectKey{Namespace: pool.Namespace, Name: secret.Name(pool.Spec.ClusterName, secret.Kubeconfig)}
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("reading the workload cluster's kubeconfig Secret %s: %w", key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in Secret %s does not load: %w", key, err)
	}
	cfg.UserAgent = "kubectl-nodepool"
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme) // registering built-in types does not fail
	_ = policyv1.AddToScheme(scheme)
	wc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the workload cluster of %s: %w", pool.Spec.ClusterName, err)
	}
	return wc, nil
}

// printDrains prints what the plan predicts of a pool's drains.
func printDrains(w io.Writer, r PlanResult) {
	if len(r.Drains) == 0 && r.DrainIgnored == 0 {
		return
	}
	for _, d := range r.Drains {
		what := "slows"
		if d.Blocks {
			what = "BLOCKS"
		}
		fmt.Fprintf(w, "  drain %s: pod %s on node %s: %s\n", what, d.Pod, d.Node, d.Why)
	}
	if r.DrainIgnored > 0 {
		fmt.Fprintf(w, "  drain ignores %d DaemonSet or static pods, as Cluster API does\n", r.DrainIgnored)
	}
}
