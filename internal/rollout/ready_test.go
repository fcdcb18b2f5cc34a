package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// A machine soaking under the health gate is not Ready to Cluster API (the
// pool's readiness gate): AllMachinesReady=False once said "3 of 3
// machines ready" then. The condition and its message agree, and name
// the machine that soaks and until when. Ready says the same; when every
// machine is ready, Ready alone counts them (a condition in its normal state
// carries no message that another says).
func TestAllMachinesReadySaysWhichMachineSoaksAndUntilWhen(t *testing.T) {
	ends := t0.Add(20 * time.Minute)
	for _, tc := range []struct {
		name              string
		replicas, ready   int32
		soaking           []string
		status            metav1.ConditionStatus
		want, wantMissing string
	}{
		{name: "a surge machine soaking", replicas: 4, ready: 3, soaking: []string{"workers-c"},
			status: metav1.ConditionFalse, want: "3 of 4 machines ready (the pool wants 3); workers-c soaks under the health gate until 2026-11-30T12:20:00Z",
			wantMissing: "3 of 3"},
		{name: "two machines soaking", replicas: 5, ready: 3, soaking: []string{"workers-c", "workers-d"},
			status: metav1.ConditionFalse, want: "3 of 5 machines ready (the pool wants 3); workers-c, workers-d soak under the health gate, the first until 2026-11-30T12:20:00Z"},
		{name: "a machine not ready, none soaking", replicas: 3, ready: 2,
			status: metav1.ConditionFalse, want: "2 of 3 machines ready", wantMissing: "soak"},
		{name: "a scale-up", replicas: 2, ready: 2,
			status: metav1.ConditionFalse, want: "2 of 3 machines ready"},
		{name: "every machine ready", replicas: 3, ready: 3,
			status: metav1.ConditionTrue, want: "3 of 3 machines ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: t0, MachineDeployment: &MachineDeployment{Replicas: tc.replicas, ReadyReplicas: tc.ready}}
			d := Decision{Replicas: 3}
			if len(tc.soaking) > 0 {
				d.Health = &HealthState{Phase: HealthSoaking, Soaking: tc.soaking, SoakEnds: ends}
			}
			var p Plan
			planReady(in, d, &p)
			c, ready := cond(p, nodepoolv1.ConditionAllMachinesReady), cond(p, nodepoolv1.ConditionReady)
			if ready.Status != tc.status || !strings.Contains(ready.Message, tc.want) || (tc.wantMissing != "" && strings.Contains(ready.Message, tc.wantMissing)) {
				t.Errorf("Ready %s %q, want %s %q", ready.Status, ready.Message, tc.status, tc.want)
			}
			switch {
			case c.Status != ready.Status:
				t.Errorf("AllMachinesReady %s disagrees with Ready %s", c.Status, ready.Status)
			case c.Status == metav1.ConditionTrue && c.Message != "":
				t.Errorf("AllMachinesReady True %q: a normal state that Ready counts needs no message", c.Message)
			case c.Status != metav1.ConditionTrue && c.Message != ready.Message:
				t.Errorf("AllMachinesReady %q disagrees with Ready %q", c.Message, ready.Message)
			}
		})
	}
}

// A controller that starts before its connection to the pool's Cluster is
// up cannot read the Nodes: the plan keeps what the status said of them
// (a new pool, which said nothing, is Unknown), never "0 nodes ready".
func TestNodesThatCannotBeReadKeepWhatTheStatusSaidOfThem(t *testing.T) {
	pool := &nodepoolv1.NodePool{}
	pool.Status.Nodes = []nodepoolv1.NodePayloadCount{{Payload: "b5959d070c188d53", Count: 3}}
	pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionAllNodesHealthy, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonNodesUnhealthy, Message: "not ready: workers-a"}}
	var p Plan
	planNodes(Input{Pool: pool, NodesUnread: true}, &p)
	if len(p.Nodes) != 1 || p.Nodes[0] != pool.Status.Nodes[0] {
		t.Errorf("nodes %+v, want the status' %+v", p.Nodes, pool.Status.Nodes)
	}
	if c := cond(p, nodepoolv1.ConditionAllNodesHealthy); c.Status != metav1.ConditionFalse || c.Message != "not ready: workers-a" {
		t.Errorf("AllNodesHealthy %s %q, want the status' False %q", c.Status, c.Message, "not ready: workers-a")
	}
	var fresh Plan
	planNodes(Input{Pool: &nodepoolv1.NodePool{}, NodesUnread: true}, &fresh)
	if c := cond(fresh, nodepoolv1.ConditionAllNodesHealthy); c.Status != metav1.ConditionUnknown || len(fresh.Nodes) != 0 {
		t.Errorf("a new pool's unread nodes: AllNodesHealthy %s, nodes %+v; want Unknown and none", c.Status, fresh.Nodes)
	}
}
