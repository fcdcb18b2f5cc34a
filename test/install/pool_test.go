package install

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// timeout bounds every wait: generous, since the tests share a small
// machine with others; a healthy run takes seconds per step.
const timeout = 4 * time.Minute

// newPool creates, in a fresh namespace, a Cluster with its control plane,
// a machine template, a user config "chrony" and a NodePool of n machines
// rolling one at a time, whose machines take bootDelay to power on.
func newPool(t *testing.T, n int32, bootDelay time.Duration) *nodepoolv1.NodePool {
	t.Helper()
	p, err := stack.CreateWorkersPool(context.Background(), env.Client, env.NewNamespace(t), n, simv1.SimMachineSpec{BootDelay: &metav1.Duration{Duration: bootDelay}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// scale sets the pool's replicas.
func scale(t *testing.T, p *nodepoolv1.NodePool, n int32) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	if err := env.Client.Patch(context.Background(), p.DeepCopy(), patch); err != nil {
		t.Fatal(err)
	}
}

// state is what the pool's machines and nodes are.
type state struct {
	pool     *nodepoolv1.NodePool
	machines sets.Set[string] // UIDs of the machines not being deleted
	nodes    int
	payloads map[string]int // node payload label → count
	history  int            // ControllerRevisions of the pool
}

func (s state) String() string {
	p := stack.Machines{Payloads: s.payloads}.PayloadCounts()
	var cs []string
	for _, c := range s.pool.Status.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("%d machines, %d nodes, payloads %v, %d revisions, updating %q; conditions: %s",
		s.machines.Len(), s.nodes, p, s.history, s.pool.Status.Updating, strings.Join(cs, "; "))
}

// payload is the one payload every node runs, or "".
func (s state) payload() string { return stack.Machines{Payloads: s.payloads}.OnlyPayload() }

func observe(t *testing.T, p *nodepoolv1.NodePool) state {
	t.Helper()
	ctx := context.Background()
	s := state{pool: &nodepoolv1.NodePool{}, machines: sets.New[string](), payloads: map[string]int{}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), s.pool); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.pool.Status.Conditions {
		if strings.Contains(strings.ToLower(c.Message), "forbidden") {
			t.Fatalf("condition %s of pool %s reports a refusal: %s", c.Type, p.Name, c.Message)
		}
	}
	m, err := stack.ReadMachines(ctx, env.Client, p)
	if err != nil {
		t.Fatal(err)
	}
	s.machines, s.nodes, s.payloads = m.UIDs, m.Nodes, m.Payloads
	s.history = len(revisions(t, p))
	return s
}

// revisions are the pool's ControllerRevisions.
func revisions(t *testing.T, p *nodepoolv1.NodePool) []appsv1.ControllerRevision {
	t.Helper()
	list := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitFor polls the pool's state until cond holds, failing the test if a
// replica exits or is refused by RBAC meanwhile.
func waitFor(t *testing.T, p *nodepoolv1.NodePool, what string, cond func(state) bool) state {
	t.Helper()
	last := ""
	return stack.WaitFor(t, timeout, what, func() state {
		checkReplicas(t)
		s := observe(t, p)
		if d := s.String(); d != last && os.Getenv("NODEPOOL_TEST_TRACE") != "" {
			t.Logf("%s %s", time.Now().Format(time.StampMilli), d)
			last = d
		}
		return s
	}, cond, state.String)
}

// settled: n machines with nodes, all on one payload, Ready, not updating.
func settled(n int) func(state) bool {
	return func(s state) bool {
		return s.machines.Len() == n && s.nodes == n && s.payload() != "" && s.pool.Status.Updating == "" &&
			meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReady)
	}
}

// waitGone waits until the pool and everything it made are gone.
func waitGone(t *testing.T, p *nodepoolv1.NodePool) {
	t.Helper()
	ctx := context.Background()
	stack.WaitFor(t, timeout, "the pool and what it made to be gone", func() string {
		checkReplicas(t)
		var left []string
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{}); !apierrors.IsNotFound(err) {
			left = append(left, "the NodePool")
		}
		for _, l := range []client.ObjectList{&clusterv1.MachineDeploymentList{}, &clusterv1.MachineList{}, &corev1.SecretList{}, &appsv1.ControllerRevisionList{}} {
			if err := env.Client.List(ctx, l, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(l); n > 0 {
				left = append(left, fmt.Sprintf("%d of %T", n, l))
			}
		}
		return strings.Join(left, ", ")
	}, func(s string) bool { return s == "" }, func(s string) string { return s + " left" })
}

// machineLog records every Machine of a namespace that ever exists, from a
// watch, so a machine created and deleted between two polls is counted too.
type machineLog struct {
	mu      sync.Mutex
	created sets.Set[string]
	deleted sets.Set[string]
}

func recordMachines(t *testing.T, ns string) *machineLog {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.GetInformer(context.Background(), &clusterv1.Machine{})
	if err != nil {
		t.Fatal(err)
	}
	l := &machineLog{created: sets.New[string](), deleted: sets.New[string]()}
	uid := func(o any) string {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(*clusterv1.Machine); ok {
			return string(m.UID)
		}
		return ""
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { l.mu.Lock(); l.created.Insert(uid(o)); l.mu.Unlock() },
		DeleteFunc: func(o any) { l.mu.Lock(); l.deleted.Insert(uid(o)); l.mu.Unlock() },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.Start(ctx) }()
	t.Cleanup(cancel)
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the Machine watch did not sync")
	}
	return l
}

// seen returns the UIDs of every Machine created and deleted so far.
func (l *machineLog) seen() (created, deleted sets.Set[string]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created.Clone(), l.deleted.Clone()
}
