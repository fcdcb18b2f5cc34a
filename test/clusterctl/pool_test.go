package clusterctl

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// newPool creates, in a fresh namespace, cluster c1, a machine template, a
// user config "chrony" and the NodePool "workers" of n machines.
func newPool(t *testing.T, n int32) *nodepoolv1.NodePool {
	t.Helper()
	p, err := stack.CreateWorkersPool(context.Background(), env.Client, env.NewNamespace(t), n, simv1.SimMachineSpec{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// state is what the pool, its machines and its record are.
type state struct {
	pool     *nodepoolv1.NodePool
	machines stack.Machines
	history  int // ControllerRevisions of the pool
}

func (s state) String() string {
	var cs []string
	for _, c := range s.pool.Status.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("%d machines, %d nodes, payloads %v, %d revisions; conditions: %s",
		s.machines.UIDs.Len(), s.machines.Nodes, s.machines.PayloadCounts(), s.history, strings.Join(cs, "; "))
}

// settled: n machines with nodes, on one payload, and the controller says
// so (stack.Settled).
func (s state) settled(n int) bool {
	return s.machines.UIDs.Len() == n && s.machines.Nodes == n && s.machines.OnlyPayload() != "" && stack.Settled(s.pool, n)
}

func observe(t *testing.T, p *nodepoolv1.NodePool) state {
	t.Helper()
	ctx := context.Background()
	s := state{pool: &nodepoolv1.NodePool{}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), s.pool); err != nil {
		t.Fatal(err)
	}
	m, err := stack.ReadMachines(ctx, env.Client, p)
	if err != nil {
		t.Fatal(err)
	}
	s.machines = m
	revs := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(ctx, revs, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	s.history = len(revs.Items)
	return s
}

// waitFor polls the pool until cond holds, failing the test if a replica
// exits or is refused meanwhile.
func waitFor(t *testing.T, p *nodepoolv1.NodePool, what string, cond func(state) bool) state {
	t.Helper()
	return stack.WaitFor(t, timeout, what, func() state {
		checkReplicas(t)
		return observe(t, p)
	}, cond, state.String)
}

// reachedPayloadServer: the machines fetched their payload over HTTPS.
func reachedPayloadServer(s state) bool {
	return meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
}

// newestRecord is the pool's newest rollout record.
func newestRecord(t *testing.T, p *nodepoolv1.NodePool) history.Entry {
	t.Helper()
	revs := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(context.Background(), revs, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) == 0 {
		t.Fatal("the pool has no record")
	}
	history.Sort(revs.Items)
	e, err := history.Decode(&revs.Items[len(revs.Items)-1])
	if err != nil {
		t.Fatal(err)
	}
	return e
}
