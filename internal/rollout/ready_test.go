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
// the machine that soaks and until when.
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
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) || (tc.wantMissing != "" && strings.Contains(c.Message, tc.wantMissing)) {
				t.Errorf("AllMachinesReady %s %q, want %s %q", c.Status, c.Message, tc.status, tc.want)
			}
			if ready.Status != c.Status || ready.Message != c.Message {
				t.Errorf("Ready %s %q disagrees with AllMachinesReady", ready.Status, ready.Message)
			}
		})
	}
}
