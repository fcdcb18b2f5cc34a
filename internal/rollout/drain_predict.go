package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// DrainPods are the pods on the nodes of the pool a rollout drains and the
// PodDisruptionBudgets of their namespaces, as read from the workload
// cluster now. `plan` reads them (Input.DrainPods); the controller does
// not, so its decisions predict no drain.
type DrainPods struct {
	Pods    []corev1.Pod
	Budgets []policyv1.PodDisruptionBudget
}

// DrainRisk is one pod that will block or slow the drain of a node a
// predicted rollout drains.
type DrainRisk struct {
	Pod, Node string
	// Budget is the PodDisruptionBudget that covers it, when that is why.
	Budget string
	// Blocks is true when the drain is predicted to stop on it; otherwise
	// it slows the drain or loses something.
	Blocks bool
	Why    string
}

// DrainForecast is what the drains of a predicted rollout will meet.
type DrainForecast struct {
	Policy poolmath.DrainPolicy
	// AtOnce is how many nodes the rollout drains together.
	AtOnce int
	Risks  []DrainRisk
	// Ignored counts the DaemonSet and static pods the drains skip.
	Ignored int
}

// DrainsAtOnce is how many nodes a rollout of the strategy drains
// together: maxUnavailable for InPlace pools, maxSurge+maxUnavailable for
// a RollingUpdate (at least 1).
func DrainsAtOnce(s Strategy) int {
	if s.Name == StrategyInPlace {
		return int(max(s.MaxUnavailable, 1))
	}
	return int(max(s.MaxSurge+s.MaxUnavailable, 1))
}

// PredictDrains says, of the pods on the nodes a rollout drains, which
// will block or slow the drain and why, as Cluster API's drain treats
// them: DaemonSet and mirror pods are skipped (counted in Ignored),
// finished pods are nothing; a PodDisruptionBudget that allows no
// disruption now blocks, one that allows fewer than the pods it covers on
// the atOnce nodes drained together slows; a pod with no controller is
// deleted and never recreated; emptyDir and hostPath volumes lose their
// data; a grace period longer than the policy's timeout blocks with Halt,
// is cut short with Force and slows with Wait.
func PredictDrains(pods []corev1.Pod, budgets []policyv1.PodDisruptionBudget, atOnce int, pol poolmath.DrainPolicy) DrainForecast {
	f := DrainForecast{Policy: pol, AtOnce: atOnce}
	pods = append([]corev1.Pod(nil), pods...)
	key := func(p corev1.Pod) string { return p.Spec.NodeName + "/" + p.Namespace + "/" + p.Name }
	sort.Slice(pods, func(i, j int) bool { return key(pods[i]) < key(pods[j]) })
	budgetOf := func(p corev1.Pod) *policyv1.PodDisruptionBudget {
		for i := range budgets {
			b := &budgets[i]
			if b.Namespace != p.Namespace || b.Spec.Selector == nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil && sel.Matches(labels.Set(p.Labels)) {
				return b
			}
		}
		return nil
	}
	covered := map[string]map[string]int{} // budget → node → pods
	var live []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
			f.Ignored++
			continue
		}
		if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			f.Ignored++
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
		add := func(budget string, blocks bool, why string) {
			f.Risks = append(f.Risks, DrainRisk{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, Budget: budget, Blocks: blocks, Why: why})
		}
		if b := budgetOf(p); b != nil {
			var counts []int
			for _, n := range covered[b.Namespace+"/"+b.Name] {
				counts = append(counts, n)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(counts)))
			together := 0
			for i := 0; i < len(counts) && i < atOnce; i++ {
				together += counts[i]
			}
			switch allowed := int(b.Status.DisruptionsAllowed); {
			case allowed <= 0:
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
		grace := 30 * time.Second // the API server's default
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
	return f
}

// Blocks reports whether a drain is predicted to block.
func (f *DrainForecast) Blocks() bool {
	if f == nil {
		return false
	}
	for _, r := range f.Risks {
		if r.Blocks {
			return true
		}
	}
	return false
}

// BlockedNodes are the nodes whose drain is predicted to block, sorted.
func (f *DrainForecast) BlockedNodes() []string {
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range f.Risks {
		if r.Blocks && !seen[r.Node] {
			seen[r.Node] = true
			out = append(out, r.Node)
		}
	}
	sort.Strings(out)
	return out
}

// forcedDelay is, with onTimeout Force, how much a predicted block adds
// to the rollout: each blocked node drains for the timeout before its
// pods are deleted, atOnce of them together.
func (f *DrainForecast) forcedDelay() time.Duration {
	n := len(f.BlockedNodes())
	if n == 0 || f.Policy.OnTimeout != nodepoolv1.DrainForce {
		return 0
	}
	rounds := (n + max(f.AtOnce, 1) - 1) / max(f.AtOnce, 1)
	return time.Duration(rounds) * f.Policy.Timeout
}

// Stall says what a predicted drain block does to the rollout, by the
// pool's drain policy; "" when no drain is predicted to block.
func (f *DrainForecast) Stall() string {
	nodes := f.BlockedNodes()
	if len(nodes) == 0 {
		return ""
	}
	var first DrainRisk
	for _, r := range f.Risks {
		if r.Blocks {
			first = r
			break
		}
	}
	what := fmt.Sprintf("the drain of %d node(s) is predicted to block (%s, pod %s: %s)", len(nodes), strings.Join(nodes, ", "), first.Pod, first.Why)
	switch f.Policy.OnTimeout {
	case nodepoolv1.DrainHalt:
		return what + fmt.Sprintf(": the rollout is predicted to halt once that drain has lasted %s (onTimeout Halt), keeping the node, until it is resumed", f.Policy.Timeout)
	case nodepoolv1.DrainForce:
		return what + fmt.Sprintf(": each such node drains for the timeout %s before its pods are deleted (onTimeout Force), about %s more", f.Policy.Timeout, f.forcedDelay())
	default:
		return what + ": the rollout is predicted to stall on it until the pods can go (onTimeout Wait waits for ever)"
	}
}

// fitWithDrains is whether a rollout fits in left, given what its drains
// are predicted to meet: base says how long the rollout takes from its
// shape alone (poolmath.Prediction.Describe); a drain predicted to block
// with Wait or Halt means the rollout does not complete in the window, and
// with Force the forced drains add their timeouts to the likely duration.
func fitWithDrains(base string, pred poolmath.Prediction, f *DrainForecast, left time.Duration) string {
	stall := f.Stall()
	if stall == "" {
		return base
	}
	var verdict string
	switch f.Policy.OnTimeout {
	case nodepoolv1.DrainForce:
		total := pred.Likely + f.forcedDelay()
		if pred.Shape.Rounds > 0 && total <= left {
			verdict = fmt.Sprintf("about %s in all: it still fits the %s of the window", round(total), round(left))
		} else {
			verdict = fmt.Sprintf("about %s in all: it is predicted not to fit the %s of the window and runs past its end (it is not stopped)", round(total), round(left))
		}
	case nodepoolv1.DrainHalt:
		verdict = "it is predicted not to complete in the window: it halts in it"
	default:
		verdict = "it is predicted not to complete in the window: it stalls in it and runs past its end"
	}
	if base == "" {
		return stall + "; " + verdict
	}
	return base + "; but " + stall + "; " + verdict
}

// round is a duration to the minute, for sentences.
func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// forecastDrains predicts, for a decision that rolls the pool's nodes, what
// the drains will meet; nil when the pods were not read (the controller)
// or nothing rolls.
func forecastDrains(in Input, d Decision) *DrainForecast {
	if in.DrainPods == nil || !d.Action.Rolls() {
		return nil
	}
	f := PredictDrains(in.DrainPods.Pods, in.DrainPods.Budgets, DrainsAtOnce(d.Strategy), poolmath.Drain(in.Pool))
	return &f
}
