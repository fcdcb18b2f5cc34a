package stack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// PoolState is what a pool's machines and nodes are, as Cluster API and
// the workload cluster say, with the pool as last read.
type PoolState struct {
	Machines sets.Set[string] // Machine UIDs
	Payloads map[string]int   // node payload label → count
	Nodes    int
	Pool     *nodepoolv1.NodePool
}

func (s PoolState) String() string {
	p := Machines{Payloads: s.Payloads}.PayloadCounts()
	return fmt.Sprintf("%d machines, %d nodes, payloads %v, updating %q", s.Machines.Len(), s.Nodes, p, s.Pool.Status.Updating)
}

// OnlyPayload returns the payload label all nodes carry, or "".
func (s PoolState) OnlyPayload() string { return Machines{Payloads: s.Payloads}.OnlyPayload() }

// Observe reads pool p and its machines and nodes.
func (s *Stack) Observe(t testing.TB, p *nodepoolv1.NodePool) PoolState {
	t.Helper()
	ctx := context.Background()
	out := PoolState{Pool: &nodepoolv1.NodePool{}}
	if err := s.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), out.Pool); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMachines(ctx, s.Env.Client, p)
	if err != nil {
		t.Fatal(err)
	}
	out.Machines, out.Nodes, out.Payloads = m.UIDs, m.Nodes, m.Payloads
	return out
}

// WaitForPool polls until cond holds for the pool's state.
func (s *Stack) WaitForPool(t testing.TB, p *nodepoolv1.NodePool, timeout time.Duration, what string, cond func(PoolState) bool) PoolState {
	t.Helper()
	return WaitFor(t, timeout, what, func() PoolState { return s.Observe(t, p) }, cond,
		func(ps PoolState) string {
			return ps.String() + "; conditions: " + Conditions(ps.Pool) + "; standing: " + Standing(ps.Pool) + "; nodepool.dev annotations: " + Annotations(ps.Pool) +
				"; " + rolloutOf(s.Env.Client, ps.Pool) + "; controller: " + ControllerView(ps.Pool) + " (test clock now " + time.Now().UTC().Format(time.RFC3339Nano) + ")"
		})
}

// rolloutOf words what Cluster API was asked and did for pool p, for a
// failure message: its MachineDeployment's spec.rollout.after and its
// MachineSets with their creation times (Cluster API replaces the machines
// of those created before it).
func rolloutOf(c client.Reader, p *nodepoolv1.NodePool) string {
	ctx := context.Background()
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), md); err != nil {
		return "MachineDeployment: " + err.Error()
	}
	out := "MachineDeployment rollout.after " + md.Spec.Rollout.After.UTC().Format(time.RFC3339)
	if md.Spec.Rollout.After.IsZero() {
		out = "MachineDeployment rollout.after unset"
	}
	mss := &clusterv1.MachineSetList{}
	if err := c.List(ctx, mss, client.InNamespace(p.Namespace)); err != nil {
		return out + "; MachineSets: " + err.Error()
	}
	for _, ms := range mss.Items {
		if metav1.IsControlledBy(&ms, md) {
			out += fmt.Sprintf("; MachineSet %s created %s, %d replicas", ms.Name, ms.CreationTimestamp.UTC().Format(time.RFC3339), ptr.Deref(ms.Spec.Replicas, 0))
		}
	}
	return out
}

// Standing words the pool's published status.rollout, for a failure
// message: what the controller last said it decided.
func Standing(p *nodepoolv1.NodePool) string {
	r := p.Status.Rollout
	if r == nil {
		return "none published"
	}
	out := fmt.Sprintf("%s settled=%v %q", r.Phase, r.Settled, r.Message)
	if r.Held != nil {
		out += fmt.Sprintf(" held by %s: %s", r.Held.By, r.Held.Message)
	}
	return out
}

// Annotations lists the pool's nodepool.dev annotations (the requests and
// the records the controller keeps there), for a failure message.
func Annotations(p *nodepoolv1.NodePool) string {
	var out []string
	for k, v := range p.Annotations {
		if strings.Contains(k, "nodepool.dev/") {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// HoldsFor asserts that cond holds for the pool's state at every look
// during d.
func (s *Stack) HoldsFor(t testing.TB, p *nodepoolv1.NodePool, d time.Duration, what string, cond func(PoolState) bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ps := s.Observe(t, p); !cond(ps) {
			t.Fatalf("%s stopped holding: %s; conditions: %s", what, ps, Conditions(ps.Pool))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// PoolSettled: the controller says the pool of n machines is settled
// (Settled), n machines with nodes exist, all on one payload.
func PoolSettled(n int) func(PoolState) bool {
	return func(s PoolState) bool {
		return Settled(s.Pool, n) && s.Machines.Len() == n && s.Nodes == n && s.OnlyPayload() != ""
	}
}

// IsTrue reports whether the pool's condition typ is True.
func IsTrue(p *nodepoolv1.NodePool, typ string) bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, typ)
}

// Condition is the pool's condition typ, empty when it has none.
func Condition(p *nodepoolv1.NodePool, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Conditions lists the pool's conditions for a failure message.
func Conditions(p *nodepoolv1.NodePool) string {
	var out []string
	for _, c := range p.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; ")
}
