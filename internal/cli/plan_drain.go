package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
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

// predictDrains reads, from the pool's workload cluster (through the
// Cluster's <cluster>-kubeconfig Secret, read-only), the pods on the nodes
// a predicted rollout drains and what will block or slow their drain.
// What it cannot read is a warning, never a failure of plan.
func (o *Options) predictDrains(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, r *PlanResult) {
	if !r.Rolls || pool == nil {
		return
	}
	warn := func(err error) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("cannot predict the drains: %v", err))
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		warn(fmt.Errorf("listing the pool's Machines: %w", err))
		return
	}
	var nodes []string
	for _, m := range machines.Items {
		if m.DeletionTimestamp.IsZero() && m.Status.NodeRef.IsDefined() {
			nodes = append(nodes, m.Status.NodeRef.Name)
		}
	}
	if len(nodes) == 0 {
		return
	}
	wc, err := workloadClient(ctx, c, pool)
	if err != nil {
		warn(err)
		return
	}
	var pods []corev1.Pod
	namespaces := map[string]bool{}
	for _, n := range nodes {
		list := &corev1.PodList{}
		if err := wc.List(ctx, list, client.MatchingFields{"spec.nodeName": n}); err != nil {
			warn(fmt.Errorf("listing the pods on node %s of the workload cluster: %w", n, err))
			return
		}
		for _, p := range list.Items {
			pods = append(pods, p)
			namespaces[p.Namespace] = true
		}
	}
	var budgets []policyv1.PodDisruptionBudget
	for ns := range namespaces {
		list := &policyv1.PodDisruptionBudgetList{}
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			warn(fmt.Errorf("listing the PodDisruptionBudgets of namespace %s of the workload cluster: %w", ns, err))
			return
		}
		budgets = append(budgets, list.Items...)
	}
	atOnce := int(max(r.MaxSurge+r.MaxUnavailable, 1))
	if r.Strategy == "InPlace" {
		atOnce = int(max(r.MaxUnavailable, 1))
	}
	r.Drains, r.DrainIgnored = drainRisks(pods, budgets, atOnce, poolmath.Drain(pool))
	for _, d := range r.Drains {
		r.DrainBlocks = r.DrainBlocks || d.Blocks
	}
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

// drainRisks says, of the pods on the nodes a rollout drains, which will
// block or slow the drain and why, as Cluster API's drain treats them:
// DaemonSet and mirror pods are skipped (counted in ignored), finished pods
// are nothing; a PodDisruptionBudget that allows no disruption now blocks,
// one that allows fewer than the pods it covers on the atOnce nodes drained
// together slows; a pod with no controller is deleted and never
// recreated; emptyDir and hostPath volumes lose their data; a grace period
// longer than the policy's timeout blocks with Halt, is cut short with
// Force and slows with Wait.
func drainRisks(pods []corev1.Pod, budgets []policyv1.PodDisruptionBudget, atOnce int, pol poolmath.DrainPolicy) (out []PlanDrain, ignored int) {
	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Spec.NodeName+"/"+pods[i].Namespace+"/"+pods[i].Name < pods[j].Spec.NodeName+"/"+pods[j].Namespace+"/"+pods[j].Name
	})
	covered := map[string]map[string]int{} // budget → node → pods
	budgetOf := func(p corev1.Pod) *policyv1.PodDisruptionBudget {
		for i := range budgets {
			b := &budgets[i]
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if b.Namespace == p.Namespace && err == nil && b.Spec.Selector != nil && sel.Matches(labels.Set(p.Labels)) {
				return b
			}
		}
		return nil
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
			ignored++
			continue
		}
		if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			ignored++
			continue
		}
		live = append(live, p)
		if b := budgetOf(p); b != nil {
			k := b.Namespace + "/" + b.Name
			if covered[k] == nil {
				covered[k] = map[string]int{}
			}
			covered[k][p.Spec.NodeName]++
		}
	}
	for _, p := range live {
		pod := p.Namespace + "/" + p.Name
		add := func(budget string, blocks bool, why string) {
			out = append(out, PlanDrain{Pod: pod, Node: p.Spec.NodeName, Budget: budget, Blocks: blocks, Why: why})
		}
		if b := budgetOf(p); b != nil {
			counts := []int{}
			for _, n := range covered[b.Namespace+"/"+b.Name] {
				counts = append(counts, n)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(counts)))
			together := 0
			for i := 0; i < len(counts) && i < atOnce; i++ {
				together += counts[i]
			}
			switch allowed := int(b.Status.DisruptionsAllowed); {
			case allowed == 0:
				add(b.Name, true, fmt.Sprintf("PodDisruptionBudget %s allows no disruption now (%d healthy, %d needed): its eviction is refused until it does", b.Name, b.Status.CurrentHealthy, b.Status.DesiredHealthy))
			case allowed < together:
				add(b.Name, false, fmt.Sprintf("PodDisruptionBudget %s allows %d disruptions, fewer than the %d pods it covers on the %d nodes drained at once: evictions wait for each other", b.Name, allowed, together, atOnce))
			}
		}
		if metav1.GetControllerOf(&p) == nil {
			add("", false, "no controller owns it: the drain deletes it and nothing recreates it")
		}
		for _, v := range p.Spec.Volumes {
			switch {
			case v.EmptyDir != nil:
				add("", false, fmt.Sprintf("emptyDir volume %s: its data is lost with the node", v.Name))
			case v.HostPath != nil:
				add("", false, fmt.Sprintf("hostPath volume %s: its data stays on the old node", v.Name))
			}
		}
		grace := time.Duration(30) * time.Second
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if grace > pol.Timeout {
			switch pol.OnTimeout {
			case nodepoolv1.DrainHalt:
				add("", true, fmt.Sprintf("termination grace period %s is longer than the drain timeout %s: the rollout halts (onTimeout Halt)", grace, pol.Timeout))
			case nodepoolv1.DrainForce:
				add("", false, fmt.Sprintf("termination grace period %s is longer than the drain timeout %s: the node goes before it stopped (onTimeout Force)", grace, pol.Timeout))
			default:
				add("", false, fmt.Sprintf("termination grace period %s is longer than the drain timeout %s: the drain is reported blocked while it stops", grace, pol.Timeout))
			}
		}
	}
	return out, ignored
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
