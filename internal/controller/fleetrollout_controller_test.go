package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// The controller keeps each pool's state on the pool: the selection, the
// trigger (with its apply-pending time, in the same patch) and the end;
// the FleetRollout's status holds counts only, and a restarted controller
// carries on from the pools without triggering any pool twice or more
// pools than maxConcurrent.
func TestTheFleetControllerKeepsEachPoolsStateOnThePool(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var objs []client.Object
	for _, ns := range []string{"a", "b", "c"} {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers", Generation: 1, Labels: map[string]string{"fleet": "proxy"}}}
		p.Status = nodepoolv1.NodePoolStatus{ObservedGeneration: 1, Replicas: 2, DesiredReplicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2,
			Rollout:                  &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true},
			PendingManagementChanges: []nodepoolv1.PendingManagementChange{{Component: "apiserver-proxy"}}}
		objs = append(objs, p)
	}
	fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: "proxy-fix", Generation: 1}, Spec: nodepoolv1.FleetRolloutSpec{
		Action: nodepoolv1.FleetActionApplyPending, HeldPools: nodepoolv1.HeldPoolWait, Waves: []intstr.IntOrString{intstr.FromString("100%")},
		MaxConcurrent: ptr.To[int32](2), PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "proxy"}}}}
	objs = append(objs, fr)
	// A pool no selector matches: the reconciles list the members only
	// (through the members' index, as the controller's cache has it).
	objs = append(objs, &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other", Generation: 1}})
	c := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(objs...).WithStatusSubresource(&nodepoolv1.FleetRollout{}, &nodepoolv1.NodePool{}).
		WithIndex(&nodepoolv1.NodePool{}, fleetMembersIndex, fleetMembers).Build()
	reconciler := func() *FleetRolloutReconciler {
		return &FleetRolloutReconciler{Client: c, Recorder: events.NewFakeRecorder(100), Clock: func() time.Time { return now }, MembersIndexed: true}
	}
	r := reconciler()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "proxy-fix"}}
	step := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	kept := func(ns string) (nodepoolv1.FleetRolloutPool, *nodepoolv1.NodePool) {
		t.Helper()
		p := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workers"}, p); err != nil {
			t.Fatal(err)
		}
		m, ok, err := fleet.MemberOf(p, "proxy-fix")
		if !ok || err != nil {
			t.Fatalf("%s keeps no state: %v (annotations %v)", ns, err, p.Annotations)
		}
		return m, p
	}
	step() // selects
	for _, ns := range []string{"a", "b", "c"} {
		if m, _ := kept(ns); m.Wave != 1 || m.State != nodepoolv1.FleetPoolPending {
			t.Fatalf("%s after the selection: %+v", ns, m)
		}
	}
	step() // triggers two
	got := &nodepoolv1.FleetRollout{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if w := got.Status.Waves[0]; w.Pools != 3 || w.Rolling != 2 || w.Waiting != 1 {
		t.Fatalf("wave %+v", w)
	}
	raw, _ := json.Marshal(got.Status)
	var generic map[string]any
	_ = json.Unmarshal(raw, &generic)
	if _, ok := generic["pools"]; ok {
		t.Fatalf("the status lists the pools: %s", raw)
	}
	var at string
	for _, ns := range []string{"a", "b"} {
		m, p := kept(ns)
		if m.State != nodepoolv1.FleetPoolRolling || m.TriggeredAt == nil || p.Annotations[nodepoolv1.AnnotationApplyPending] != m.TriggeredAt.UTC().Format(time.RFC3339) || p.Annotations[nodepoolv1.AnnotationFleetRollout] != "proxy-fix" {
			t.Fatalf("%s triggered: %+v, annotations %v", ns, m, p.Annotations)
		}
		at = p.Annotations[nodepoolv1.AnnotationApplyPending]
	}
	// A restarted controller: nothing more is triggered, no time moves.
	r = reconciler()
	step()
	step()
	if m, p := kept("c"); m.State != nodepoolv1.FleetPoolPending || p.Annotations[nodepoolv1.AnnotationApplyPending] != "" {
		t.Fatalf("c after a restart: %+v, %v (maxConcurrent 2)", m, p.Annotations)
	}
	if _, p := kept("a"); p.Annotations[nodepoolv1.AnnotationApplyPending] != at {
		t.Fatalf("a's time moved after a restart: %v, want %s", p.Annotations, at)
	}
	// Deleting the rollout removes its state from the pools.
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	step()
	for _, ns := range []string{"a", "b", "c"} {
		p := &nodepoolv1.NodePool{}
		_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workers"}, p)
		if _, ok := p.Annotations[nodepoolv1.FleetRolloutPoolAnnotation("proxy-fix")]; ok {
			t.Fatalf("%s keeps the state of a deleted rollout: %v", ns, p.Annotations)
		}
	}
}
