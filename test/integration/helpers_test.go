package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

const clusterName = "c1"

// newPool creates a Cluster with its control plane and a machine template
// in a fresh namespace, and a NodePool of n machines with one user config.
func newPool(t *testing.T, name string, n int32) *nodepoolv1.NodePool {
	t.Helper()
	return newPoolWith(t, name, n, nil)
}

// newPoolWith is newPool with a hook that may create more objects in the
// namespace and edit the pool before it is created.
func newPoolWith(t *testing.T, name string, n int32, edit func(ns string, p *nodepoolv1.NodePool)) *nodepoolv1.NodePool {
	t.Helper()
	ctx := context.Background()
	ns := env.NewNamespace(t)
	createCluster(t, ns, clusterName)
	createTemplate(t, ns, "small")
	mustCreate(t, stack.ConfigMap(ns, "chrony", stack.Chrony("time.corp.example")))
	p := &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName:               clusterName,
			Replicas:                  ptr.To(n),
			Release:                   nodepoolv1.Release{Version: "v1.36.3"},
			Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
			InfrastructureTemplateRef: templateRef("small"),
		},
	}
	if edit != nil {
		edit(ns, p)
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCreate(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// update reads o, applies change and writes it back, retrying conflicts.
func update[T client.Object](t *testing.T, o T, change func(T)) {
	t.Helper()
	for range 20 {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		change(o)
		err := env.Client.Update(context.Background(), o)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not update %s", o.GetName())
}

// setManagementConfig changes the platform's management config (shared by
// every pool of the test run).
func setManagementConfig(t *testing.T, change func(string) string) {
	t.Helper()
	cm := managementConfig("")
	update(t, cm, func(cm *corev1.ConfigMap) {
		cm.Data[inputs.ManagementConfigKey] = change(cm.Data[inputs.ManagementConfigKey])
	})
}

// state is what a pool's machines and nodes are, as Cluster API and the
// workload cluster say.
type state struct {
	machines sets.Set[string] // Machine UIDs
	payloads map[string]int   // node payload label → count
	nodes    int
	pool     *nodepoolv1.NodePool
}

func (s state) String() string {
	p := stack.Machines{Payloads: s.payloads}.PayloadCounts()
	return fmt.Sprintf("%d machines, %d nodes, payloads %v, updating %q", s.machines.Len(), s.nodes, p, s.pool.Status.Updating)
}

// onlyPayload returns the payload label all nodes carry, or "".
func (s state) onlyPayload() string { return stack.Machines{Payloads: s.payloads}.OnlyPayload() }

func observe(t *testing.T, p *nodepoolv1.NodePool) state {
	t.Helper()
	ctx := context.Background()
	s := state{machines: sets.New[string](), payloads: map[string]int{}, pool: &nodepoolv1.NodePool{}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), s.pool); err != nil {
		t.Fatal(err)
	}
	m, err := stack.ReadMachines(ctx, env.Client, p)
	if err != nil {
		t.Fatal(err)
	}
	s.machines, s.nodes, s.payloads = m.UIDs, m.Nodes, m.Payloads
	return s
}

// waitFor polls until cond holds for the pool's state.
func waitFor(t *testing.T, p *nodepoolv1.NodePool, timeout time.Duration, what string, cond func(state) bool) state {
	t.Helper()
	return stack.WaitFor(t, timeout, what, func() state { return observe(t, p) }, cond,
		func(s state) string { return s.String() + "; conditions: " + conditions(s.pool) })
}

// settled: the controller says the pool of n machines is settled
// (stack.Settled), n machines with nodes exist, all on one payload.
func settled(n int) func(state) bool {
	return func(s state) bool {
		return stack.Settled(s.pool, n) && s.machines.Len() == n && s.nodes == n && s.onlyPayload() != ""
	}
}

func isTrue(p *nodepoolv1.NodePool, typ string) bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, typ)
}

func condition(p *nodepoolv1.NodePool, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func conditions(p *nodepoolv1.NodePool) string {
	var out []string
	for _, c := range p.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; ")
}

// holdsFor asserts that cond holds at every look during d.
func holdsFor(t *testing.T, p *nodepoolv1.NodePool, d time.Duration, what string, cond func(state) bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if s := observe(t, p); !cond(s) {
			t.Fatalf("%s stopped holding: %s; conditions: %s", what, s, conditions(s.pool))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func scale(t *testing.T, p *nodepoolv1.NodePool, n int32) {
	t.Helper()
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(n) })
}

// nodesMatch reports whether every node of the pool's machines satisfies ok.
func nodesMatch(t *testing.T, p *nodepoolv1.NodePool, ok func(*corev1.Node) bool) bool {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Items {
		n := &corev1.Node{}
		if !m.Status.NodeRef.IsDefined() || env.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, n) != nil || !ok(n) {
			return false
		}
	}
	return len(ms.Items) > 0
}
