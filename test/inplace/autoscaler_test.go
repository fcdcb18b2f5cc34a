package inplace

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/test/stack"
)

// autoscaled is a pool edit: autoScaling between min and max instead of
// a fixed size.
func autoscaled(minimum, maximum int32) func(string, *nodepoolv1.NodePool) {
	return func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Replicas, p.Spec.AutoScaling = nil, &nodepoolv1.AutoScaling{Min: minimum, Max: maximum}
	}
}

// scalable is the pool's MachineDeployment (Replace) or MachineSet
// (InPlace): what Cluster API's autoscaler scales.
func scalable(p *nodepoolv1.NodePool) client.Object {
	meta := metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}
	if p.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		return &clusterv1.MachineSet{ObjectMeta: meta}
	}
	return &clusterv1.MachineDeployment{ObjectMeta: meta}
}

// specReplicas reads the pool's MachineDeployment or MachineSet: its
// spec.replicas and the autoscaler's bounds annotations.
func specReplicas(t *testing.T, p *nodepoolv1.NodePool) (replicas int32, minSize, maxSize string) {
	t.Helper()
	o := scalable(p)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
	switch o := o.(type) {
	case *clusterv1.MachineDeployment:
		replicas = ptr.Deref(o.Spec.Replicas, -1)
	case *clusterv1.MachineSet:
		replicas = ptr.Deref(o.Spec.Replicas, -1)
	}
	a := o.GetAnnotations()
	return replicas, a[clusterv1.AutoscalerMinSizeAnnotation], a[clusterv1.AutoscalerMaxSizeAnnotation]
}

// playAutoscaler does what cluster-autoscaler's Cluster API provider
// does: it patches spec.replicas of the MachineDeployment or MachineSet.
func playAutoscaler(t *testing.T, p *nodepoolv1.NodePool, n int32) {
	t.Helper()
	o := scalable(p)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":`+strconv.Itoa(int(n))+`}}`))
	if err := env.Client.Patch(context.Background(), o, patch); err != nil {
		t.Fatal(err)
	}
}

// rolloutStatus runs `kubectl nodepool rollout status --watch=false`.
func rolloutStatus(t *testing.T, p *nodepoolv1.NodePool) cli.RolloutStatus {
	t.Helper()
	kubeconfig, err := st.WriteKubeconfig("kubeconfig-"+p.Namespace, p.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cli.Run(context.Background(), streams, []string{"--kubeconfig", kubeconfig, "-n", p.Namespace, "rollout", "status", p.Name, "--watch=false", "-o", "json"})
	if code != 0 {
		t.Fatalf("rollout status: exit %d: %s%s", code, out.String(), errOut.String())
	}
	var s cli.RolloutStatus
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("rollout status: %v\n%s", err, out.String())
	}
	return s
}

// ready: n machines with nodes, the pool Ready with n replicas.
func ready(n int) func(stack.PoolState) bool {
	return func(s stack.PoolState) bool {
		return s.Machines.Len() == n && s.Nodes == n && s.Pool.Status.Replicas == int32(n) && s.Pool.Status.ReadyReplicas == int32(n) &&
			stack.IsTrue(s.Pool, nodepoolv1.ConditionReady)
	}
}

// testAutoscalerActor: the controller sets the bounds, keeps the count the
// autoscaler chose within them, and clamps it when the owner narrows them.
func testAutoscalerActor(t *testing.T, edit func(string, *nodepoolv1.NodePool)) {
	p := st.NewPoolWith(t, "workers", 0, func(ns string, p *nodepoolv1.NodePool) {
		autoscaled(1, 5)(ns, p)
		if edit != nil {
			edit(ns, p)
		}
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "a new autoscaled pool starts at min", stack.PoolSettled(1))
	if n, lo, hi := specReplicas(t, p); n != 1 || lo != "1" || hi != "5" {
		t.Fatalf("spec.replicas %d, autoscaler bounds %q..%q; want 1, 1..5", n, lo, hi)
	}

	playAutoscaler(t, p, 3)
	st.WaitForPool(t, p, stack.RolloutTimeout, "the pool grown to the autoscaler's 3", ready(3))
	st.HoldsFor(t, p, 10*time.Second, "the controller keeps the autoscaler's count", func(s stack.PoolState) bool {
		n, _, _ := specReplicas(t, p)
		return n == 3 && s.Machines.Len() == 3
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "status.desiredReplicas (kubectl get's Desired) is the autoscaler's 3", func(s stack.PoolState) bool {
		return s.Pool.Status.DesiredReplicas == 3
	})
	if st := rolloutStatus(t, p); st.Desired != 3 || st.Replicas != 3 {
		t.Errorf("rollout status: desired %d, replicas %d; want 3 and 3", st.Desired, st.Replicas)
	}
	if h := st.HistoryOf(t, p); len(h) != 1 {
		t.Errorf("scaling recorded rollouts: %d records", len(h))
	}

	// The owner narrows the bounds below the count: it is clamped.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: 1, Max: 2} })
	st.WaitForPool(t, p, stack.RolloutTimeout, "the pool clamped to the new max 2", func(s stack.PoolState) bool {
		n, _, hi := specReplicas(t, p)
		return n == 2 && hi == "2" && ready(2)(s)
	})
	if st := rolloutStatus(t, p); st.Desired != 2 {
		t.Errorf("rollout status: desired %d, want 2", st.Desired)
	}
	// The autoscaler going beyond the bounds is brought back.
	playAutoscaler(t, p, 4)
	st.WaitForPool(t, p, stack.RolloutTimeout, "a count beyond max brought back to 2", func(s stack.PoolState) bool {
		n, _, _ := specReplicas(t, p)
		return n == 2 && ready(2)(s)
	})
}

func TestAutoscalerOwnsTheCountOfAnAutoscaledPoolWithinBounds(t *testing.T) {
	testAutoscalerActor(t, nil)
}

func TestAutoscalerOwnsTheCountOfAnAutoscaledInPlacePoolWithinBounds(t *testing.T) {
	testAutoscalerActor(t, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
	})
}

// kubectl scale nodepool: the scale subresource sets spec.replicas, the
// machines follow, and its status reports the replicas and a selector of
// the pool's Machines.
func TestScaleSubresourceScalesAFixedSizePool(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	sc := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, p, sc); err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 2
	if err := env.Client.SubResource("scale").Update(ctx, p, client.WithSubResourceBody(sc)); err != nil {
		t.Fatal(err)
	}
	st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes after kubectl scale", stack.PoolSettled(2))
	if err := env.Client.SubResource("scale").Get(ctx, p, sc); err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 2 {
		t.Errorf("scale spec %d status %d, want 2 and 2", sc.Spec.Replicas, sc.Status.Replicas)
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil || sc.Status.Selector == "" {
		t.Fatalf("scale selector %q: %v", sc.Status.Selector, err)
	}
	machines := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, machines, client.InNamespace(p.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 2 {
		t.Errorf("selector %q selects %d Machines, want the pool's 2", sc.Status.Selector, len(machines.Items))
	}
	if h := st.HistoryOf(t, p); len(h) != 1 {
		t.Errorf("scaling recorded rollouts: %d records", len(h))
	}
}
