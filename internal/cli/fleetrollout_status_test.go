package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// The FleetRollout's status no longer lists every pool; `fleet rollout
// status` still shows every one, from what each pool keeps and reports.
func TestFleetRolloutStatusShowsEveryPoolFromThePools(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-5 * time.Minute))
	at := metav1.NewTime(now.Add(-4 * time.Minute))
	fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: "proxy-fix"},
		Spec: nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending, HeldPools: nodepoolv1.HeldPoolWait, Waves: []intstr.IntOrString{intstr.FromString("100%")}},
		Status: nodepoolv1.FleetRolloutStatus{Phase: nodepoolv1.FleetPhaseProgressing, StartedAt: &started, CurrentWave: 1,
			Waves: []nodepoolv1.FleetRolloutWave{{Wave: 1, Pools: 3, Rolling: 1, Done: 1, Waiting: 1, StartedAt: &started}}}}
	pool := func(ns string, kept nodepoolv1.FleetRolloutPool, held bool) *nodepoolv1.NodePool {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers",
			Annotations: map[string]string{nodepoolv1.FleetRolloutPoolAnnotation("proxy-fix"): fleet.Encode(kept)}}}
		p.Status.PendingManagementChanges = []nodepoolv1.PendingManagementChange{{Component: "apiserver-proxy"}}
		p.Status.Replicas, p.Status.DesiredReplicas = 1, 1
		if held {
			p.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionMaintenanceWindow, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonOutsideMaintenanceWindow, Message: "the next window opens at 2026-12-02T02:00:00Z"}}
		}
		return p
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fr,
		pool("a", nodepoolv1.FleetRolloutPool{Wave: 1, State: nodepoolv1.FleetPoolDone, TriggeredAt: &at, Revision: 3}, false),
		pool("b", nodepoolv1.FleetRolloutPool{Wave: 1, State: nodepoolv1.FleetPoolRolling, TriggeredAt: &at}, false),
		pool("c", nodepoolv1.FleetRolloutPool{Wave: 1, State: nodepoolv1.FleetPoolPending}, true),
		&nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "other"}},
	).Build()
	var out bytes.Buffer
	o := &Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}, Output: "json", Now: func() time.Time { return now }, client: c}
	if err := o.fleetRolloutStatus(context.Background(), "proxy-fix", false, 0, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var r FleetRolloutReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := map[string]nodepoolv1.FleetRolloutPool{}
	for _, p := range r.Pools {
		got[p.Namespace] = p
	}
	if len(r.Pools) != 3 || got["a"].State != nodepoolv1.FleetPoolDone || got["a"].Revision != 3 ||
		got["b"].State != nodepoolv1.FleetPoolRolling || got["c"].State != nodepoolv1.FleetPoolWaiting ||
		!strings.Contains(got["c"].Message, "OutsideMaintenanceWindow") || len(r.Waiting) != 1 {
		t.Fatalf("pools %+v, waiting %+v", r.Pools, r.Waiting)
	}
	// The table shows every pool too.
	out.Reset()
	o.Output = "table"
	if err := o.fleetRolloutStatus(context.Background(), "proxy-fix", false, 0, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a   ", "b   ", "c   ", "Waiting", "OutsideMaintenanceWindow"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
	// The fleet column reads the membership from the pools.
	list := &nodepoolv1.NodePoolList{}
	if err := c.List(context.Background(), list, client.InNamespace("b")); err != nil {
		t.Fatal(err)
	}
	if m := fleetMembership(context.Background(), c, list.Items); m["b/workers"] != "proxy-fix(wave 1, rolling)" {
		t.Fatalf("membership %v", m)
	}
}
