package inplace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

// Sim knobs of the node agent (internal/sim): how long an update takes,
// and a message to fail it with.
const (
	knobUpdateDelay = "sim.nodepool.dev/update-delay"
	knobFailUpdate  = "sim.nodepool.dev/fail-update"
)

// newInPlacePool is st.NewPool for an InPlace pool with the given
// maxUnavailable.
func newInPlacePool(t *testing.T, n int32, maxUnavailable int) *nodepoolv1.NodePool {
	t.Helper()
	return st.NewPoolWith(t, "workers", n, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
		p.Spec.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt(maxUnavailable))
	})
}

// inPlaceNode is one machine of a pool with its Node, sorted by machine.
type inPlaceNode struct {
	machine   clusterv1.Machine
	node      corev1.Node
	hasNode   bool
	updatedAt string
}

func (n inPlaceNode) phase() string { return n.node.Annotations[nodepoolv1.AnnotationUpdatePhase] }

// done: the node runs the desired payload and the controller is finished
// with it.
func (n inPlaceNode) done(payload string) bool {
	a := n.node.Annotations
	return n.hasNode && a[nodepoolv1.AnnotationNodeCurrentPayload] == payload && a[nodepoolv1.AnnotationUpdateState] == nodepoolv1.UpdateStateDone &&
		n.phase() == "" && !n.node.Spec.Unschedulable
}

func inPlaceNodes(t *testing.T, p *nodepoolv1.NodePool) []inPlaceNode {
	t.Helper()
	out, err := listInPlaceNodes(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func listInPlaceNodes(p *nodepoolv1.NodePool) ([]inPlaceNode, error) {
	ctx := context.Background()
	ms := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		return nil, err
	}
	var out []inPlaceNode
	for _, m := range ms.Items {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		n := inPlaceNode{machine: m, updatedAt: m.Annotations[nodepoolv1.AnnotationUpdatedAt]}
		if m.Status.NodeRef.IsDefined() && env.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &n.node) == nil {
			n.hasNode = true
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].machine.Name < out[j].machine.Name })
	return out, nil
}

// cordons is what watchCordons saw: the most Nodes cordoned at once, and
// the machines updated again after they finished.
type cordons struct {
	most  int
	twice []string
}

// watchCordons samples the pool's Nodes until stop is closed (or the test
// ends) and returns the most Nodes seen cordoned at once, and every node
// that was seen in an update phase again after it was recorded finished
// (a second update).
func watchCordons(t *testing.T, p *nodepoolv1.NodePool, stop chan struct{}) <-chan cordons {
	out := make(chan cordons, 1)
	t.Cleanup(func() { stopOnce(stop) })
	go func() {
		most, finished, twice := 0, map[string]string{}, sets.New[string]()
		for {
			select {
			case <-stop:
				out <- cordons{most: most, twice: sets.List(twice)}
				return
			default:
			}
			nodes, err := listInPlaceNodes(p)
			if err != nil {
				continue
			}
			// Cordons are counted on one List, a consistent snapshot (the
			// Gets of listInPlaceNodes are not: a node uncordoned and the
			// next cordoned between two Gets would count twice).
			ours := sets.New[string]()
			for _, n := range nodes {
				ours.Insert(n.node.Name)
			}
			list := &corev1.NodeList{}
			if err := env.Client.List(context.Background(), list); err != nil {
				continue
			}
			cordoned := 0
			for _, n := range list.Items {
				if ours.Has(n.Name) && n.Spec.Unschedulable {
					cordoned++
				}
			}
			for _, n := range nodes {
				if at, ok := finished[n.machine.Name]; ok && (n.phase() != "" || n.updatedAt != at) {
					twice.Insert(n.machine.Name)
				}
				if n.updatedAt != "" && n.phase() == "" {
					finished[n.machine.Name] = n.updatedAt
				}
			}
			most = max(most, cordoned)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return out
}

// stopOnce closes stop unless the test's cleanup did.
func stopOnce(stop chan struct{}) {
	select {
	case <-stop:
	default:
		close(stop)
	}
}

func annotateMachines(t *testing.T, p *nodepoolv1.NodePool, key, value string, which func(i int) bool) {
	t.Helper()
	for i, n := range inPlaceNodes(t, p) {
		if !which(i) {
			continue
		}
		m := n.machine.DeepCopy()
		stack.Update(t, env.Client, m, func(m *clusterv1.Machine) {
			if value == "" {
				delete(m.Annotations, key)
				return
			}
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[key] = value
		})
	}
}

func all(int) bool { return true }

func changeChrony(t *testing.T, p *nodepoolv1.NodePool, server string) {
	t.Helper()
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony(server) })
}

func TestInPlaceOwnerChangeUpdatesEveryNodeWithoutReplacingMachines(t *testing.T) {
	p := newInPlacePool(t, 3, 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	annotateMachines(t, p, knobUpdateDelay, "1s", all)

	stop := make(chan struct{})
	seen := watchCordons(t, p, stop)
	changeChrony(t, p, "inplace.corp.example")
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every node updated in place", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.OnlyPayload() != before.OnlyPayload()
	})
	stopOnce(stop)
	res := <-seen
	if most := res.most; most > 1 {
		t.Errorf("%d nodes were cordoned at once, maxUnavailable is 1", most)
	}
	if !after.Machines.Equal(before.Machines) {
		t.Errorf("machines were replaced: before %v, after %v", sets.List(before.Machines), sets.List(after.Machines))
	}
	payload := after.Pool.Annotations[nodepoolv1.AnnotationCurrentPayload]
	target := ""
	for _, n := range inPlaceNodes(t, p) {
		if !n.done(payload) || n.updatedAt == "" {
			t.Errorf("node %s: annotations %v, unschedulable %v, machine updated at %q; want done on %s",
				n.node.Name, n.node.Annotations, n.node.Spec.Unschedulable, n.updatedAt, payload)
		}
		ds := ptr.Deref(n.machine.Spec.Bootstrap.DataSecretName, "")
		if target != "" && ds != target {
			t.Errorf("machines run different user-data: %s and %s", target, ds)
		}
		target = ds
	}
	e := st.LastRecord(t, p, string(rollout.InitiatorSpec), history.OutcomeComplete)
	if strings.Join(e.Changed, ",") != "user-configs" {
		t.Errorf("the rollout is recorded with changed components %v", e.Changed)
	}
	// The token the agents fetched with leaves the workload cluster.
	secret := client.ObjectKey{Namespace: "kube-system", Name: "nodepool-update." + p.Namespace + ".workers"}
	stack.WaitFor(t, 30*time.Second, "the update Secret deleted", func() error {
		return env.Client.Get(context.Background(), secret, &corev1.Secret{})
	}, apierrors.IsNotFound, func(err error) string { return fmt.Sprint(err) })
}

func TestInPlaceManagementOnlyChangeUpdatesNothingAndIsReportedAsDrift(t *testing.T) {
	p := newInPlacePool(t, 2, 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, time.Minute, "the drift reported", func(s stack.PoolState) bool {
		for _, r := range s.Pool.Status.PendingManagementChanges {
			if r.Component == "apiserver-proxy" {
				return true
			}
		}
		return false
	})
	st.HoldsFor(t, p, 6*time.Second, "no node touched", func(s stack.PoolState) bool {
		if !s.Machines.Equal(before.Machines) || s.OnlyPayload() != before.OnlyPayload() {
			return false
		}
		for _, n := range inPlaceNodes(t, p) {
			if n.phase() != "" || n.node.Spec.Unschedulable || n.updatedAt != "" {
				return false
			}
		}
		return true
	})
}

func TestInPlacePodDisruptionBudgetHoldsTheUpdateUntilItAllowsIt(t *testing.T) {
	ctx := context.Background()
	p := newInPlacePool(t, 2, 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	nodes := inPlaceNodes(t, p)
	first, second := nodes[0], nodes[1]

	// A pod bound to the node updated first, guarded by a budget that
	// allows no disruption.
	labels := map[string]string{"app": "guarded-" + p.Namespace}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "guarded", Labels: labels},
		Spec: corev1.PodSpec{NodeName: first.node.Name, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	st.MustCreate(t, pod)
	// The sim plays the kubelet: the pod runs and is ready (a pending pod
	// is evicted whatever its budget says).
	stack.WaitFor(t, time.Minute, "the guarded pod running and ready", func() *corev1.Pod {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		return got
	}, func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return p.Status.Phase == corev1.PodRunning
			}
		}
		return false
	}, func(p *corev1.Pod) string { return string(p.Status.Phase) })
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "guarded"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	st.MustCreate(t, pdb)
	setBudget(t, pdb, 0)

	changeChrony(t, p, "pdb.corp.example")
	st.WaitForPool(t, p, time.Minute, "the blocked drain reported on the pool", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingConfig)
		return c.Reason == nodepoolv1.ReasonDrainBlocked && strings.Contains(c.Message, first.node.Name) && strings.Contains(c.Message, "guarded")
	})
	st.HoldsFor(t, p, 5*time.Second, "the update held on that node, the other untouched", func(s stack.PoolState) bool {
		for _, n := range inPlaceNodes(t, p) {
			if n.machine.Name == second.machine.Name && (n.phase() != "" || n.node.Spec.Unschedulable) {
				return false
			}
			if n.machine.Name == first.machine.Name && n.phase() != nodepoolv1.UpdatePhaseDraining {
				return false
			}
		}
		return true
	})

	setBudget(t, pdb, 1)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every node updated once the budget allows it", stack.PoolSettled(2))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err == nil {
		t.Error("the guarded pod was not evicted")
	}
	for _, n := range inPlaceNodes(t, p) {
		if !n.done(after.Pool.Annotations[nodepoolv1.AnnotationCurrentPayload]) {
			t.Errorf("node %s not done: %v", n.node.Name, n.node.Annotations)
		}
	}
}

// setBudget makes the budget allow n disruptions of its one pod (the
// sim plays the disruption controller and computes its status).
func setBudget(t *testing.T, pdb *policyv1.PodDisruptionBudget, n int) {
	t.Helper()
	stack.Update(t, env.Client, pdb, func(pdb *policyv1.PodDisruptionBudget) {
		pdb.Spec.MinAvailable = ptr.To(intstr.FromInt(1 - n))
	})
}

func TestInPlaceFailedNodeStopsTheRolloutUntilItIsFixed(t *testing.T) {
	p := newInPlacePool(t, 3, 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	annotateMachines(t, p, knobFailUpdate, "disk full", func(i int) bool { return i == 1 })

	changeChrony(t, p, "degraded.corp.example")
	st.WaitForPool(t, p, time.Minute, "the failed node reported on the pool", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingConfig)
		return c.Reason == nodepoolv1.ReasonNodeUpdateDegraded && strings.Contains(c.Message, "disk full")
	})
	st.HoldsFor(t, p, 5*time.Second, "the third node untouched while the second is Degraded", func(s stack.PoolState) bool {
		third := inPlaceNodes(t, p)[2]
		return third.phase() == "" && !third.node.Spec.Unschedulable && third.updatedAt == ""
	})

	annotateMachines(t, p, knobFailUpdate, "", func(i int) bool { return i == 1 })
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every node updated once the node is fixed", stack.PoolSettled(3))
	for _, n := range inPlaceNodes(t, p) {
		if !n.done(after.Pool.Annotations[nodepoolv1.AnnotationCurrentPayload]) {
			t.Errorf("node %s not done: %v", n.node.Name, n.node.Annotations)
		}
	}
	if c := stack.Condition(after.Pool, nodepoolv1.ConditionUpdatingConfig); c.Reason == nodepoolv1.ReasonNodeUpdateDegraded {
		t.Errorf("UpdatingConfig still says %s", c.Message)
	}
}

func TestInPlaceControllerRestartedMidUpdateResumesWithoutTouchingFinishedNodesTwice(t *testing.T) {
	p := newInPlacePool(t, 3, 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	annotateMachines(t, p, knobUpdateDelay, "2s", all)

	stop := make(chan struct{})
	seen := watchCordons(t, p, stop)
	changeChrony(t, p, "restart.corp.example")
	deadline := time.Now().Add(stack.RolloutTimeout)
	for {
		finished := 0
		for _, n := range inPlaceNodes(t, p) {
			if n.updatedAt != "" && n.phase() == "" {
				finished++
			}
		}
		if finished >= 1 && finished < 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node finished its update; %s", stack.Conditions(st.Observe(t, p).Pool))
		}
		time.Sleep(100 * time.Millisecond)
	}
	st.MustRestartController(t, settings)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every node updated after the restart", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.OnlyPayload() != before.OnlyPayload()
	})
	stopOnce(stop)
	res := <-seen
	if twice := res.twice; len(twice) > 0 {
		t.Errorf("machines updated twice: %v", twice)
	}
	if most := res.most; most > 1 {
		t.Errorf("%d nodes cordoned at once, maxUnavailable is 1", most)
	}
	if !after.Machines.Equal(before.Machines) {
		t.Error("machines were replaced")
	}
}

func TestInPlaceRolloutAfterUpdatesEveryNodeInPlaceOnce(t *testing.T) {
	p := newInPlacePool(t, 2, 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
	st.WaitForPool(t, p, stack.RolloutTimeout, "every node updated after rolloutAfter", func(s stack.PoolState) bool {
		if !stack.PoolSettled(2)(s) {
			return false
		}
		for _, n := range inPlaceNodes(t, p) {
			u, err := time.Parse(time.RFC3339, n.updatedAt)
			if err != nil || u.Before(at.Time) {
				return false
			}
		}
		return true
	})
	if after := st.Observe(t, p); !after.Machines.Equal(before.Machines) {
		t.Error("machines were replaced")
	}
	e := st.LastRecord(t, p, string(rollout.InitiatorRestart), history.OutcomeComplete)
	if e.ForcedAt == nil {
		t.Errorf("the forced rollout is recorded without its time: %+v", e)
	}
	updated := map[string]string{}
	for _, n := range inPlaceNodes(t, p) {
		updated[n.machine.Name] = n.updatedAt
	}
	st.HoldsFor(t, p, 5*time.Second, "updated once only", func(s stack.PoolState) bool {
		for _, n := range inPlaceNodes(t, p) {
			if updated[n.machine.Name] != n.updatedAt {
				return false
			}
		}
		return true
	})
}

func TestInPlaceVersionChangeUpdatesTheKubeletInPlace(t *testing.T) {
	p := newInPlacePool(t, 2, 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Release.Version = "v1.36.4" })
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every node on the new version, in place", func(s stack.PoolState) bool {
		if !stack.PoolSettled(2)(s) || s.Pool.Status.Version != "v1.36.4" {
			return false
		}
		for _, n := range inPlaceNodes(t, p) {
			if n.machine.Spec.Version != "v1.36.4" || n.node.Status.NodeInfo.KubeletVersion != "v1.36.4" {
				return false
			}
		}
		return true
	})
	if !after.Machines.Equal(before.Machines) {
		t.Error("machines were replaced")
	}
	st.LastRecord(t, p, string(rollout.InitiatorVersion), history.OutcomeComplete)
}
