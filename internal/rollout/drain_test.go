package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func TestTheDrainPolicyResolvesFromTheSpec(t *testing.T) {
	d := func(s string) *metav1.Duration { v, _ := time.ParseDuration(s); return &metav1.Duration{Duration: v} }
	for _, tc := range []struct {
		name  string
		spec  nodepoolv1.NodePoolSpec
		want  poolmath.DrainPolicy
		force time.Duration
	}{
		{"unset waits for ever, reported after 10m", nodepoolv1.NodePoolSpec{}, poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainWait, Timeout: 10 * time.Minute}, 0},
		{"nodeDrainTimeout is Force after it", nodepoolv1.NodePoolSpec{NodeDrainTimeout: d("5m")}, poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainForce, Timeout: 5 * time.Minute}, 5 * time.Minute},
		{"Force after the timeout", nodepoolv1.NodePoolSpec{Management: nodepoolv1.Management{Drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainForce, Timeout: d("1h")}}},
			poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainForce, Timeout: time.Hour}, time.Hour},
		{"Halt never forces", nodepoolv1.NodePoolSpec{Management: nodepoolv1.Management{Drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainHalt, Timeout: d("1h")}}},
			poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainHalt, Timeout: time.Hour}, 0},
		{"Wait with a timeout reports after it", nodepoolv1.NodePoolSpec{Management: nodepoolv1.Management{Drain: &nodepoolv1.Drain{Timeout: d("2m")}}},
			poolmath.DrainPolicy{OnTimeout: nodepoolv1.DrainWait, Timeout: 2 * time.Minute}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := poolmath.Drain(&nodepoolv1.NodePool{Spec: tc.spec})
			if got != tc.want || got.ForceAfter() != tc.force {
				t.Errorf("Drain = %+v (force after %s), want %+v (%s)", got, got.ForceAfter(), tc.want, tc.force)
			}
		})
	}
}

func TestADrainPastItsTimeoutIsBlockedAndHaltsOnlyWithHalt(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	target := &UserData{Name: "workers-new", RolloutHash: "new"}
	blocker := []nodepoolv1.DrainBlocker{{Pod: "apps/web-1", Budget: "web", Reason: "its eviction is refused"}}
	pool := func(on nodepoolv1.DrainTimeoutPolicy, ann map[string]string, drains ...nodepoolv1.NodeDrainStatus) *nodepoolv1.NodePool {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers", Annotations: ann}}
		p.Spec.Management.Drain = &nodepoolv1.Drain{OnTimeout: on, Timeout: &metav1.Duration{Duration: 30 * time.Minute}}
		p.Status.Drains = drains
		return p
	}
	drain := func(age time.Duration) NodeDrain {
		return NodeDrain{Machine: "m1", Node: "n1", Since: now.Add(-age), Pods: blocker}
	}
	onRecord := func(age time.Duration, blocked bool) nodepoolv1.NodeDrainStatus {
		return nodepoolv1.NodeDrainStatus{Node: "n1", Machine: "m1", Since: metav1.NewTime(now.Add(-age)), Blocked: blocked, Pods: blocker}
	}
	for _, tc := range []struct {
		name        string
		pool        *nodepoolv1.NodePool
		drains      []NodeDrain
		blocked     bool
		event       string // substring of the DrainBlocked event, "" for none
		halt        bool
		record      string
		requeueSoon bool
	}{
		{name: "a drain within its timeout is reported, not blocked, and looked at when it ends",
			pool: pool(nodepoolv1.DrainWait, nil), drains: []NodeDrain{drain(10 * time.Minute)}, requeueSoon: true},
		{name: "Wait: past the timeout it is blocked, said once",
			pool: pool(nodepoolv1.DrainWait, nil), drains: []NodeDrain{drain(31 * time.Minute)}, blocked: true,
			event: "node n1 (machine m1) has drained for 30m0s with pods left: pod apps/web-1 (PodDisruptionBudget web): its eviction is refused; waiting for them (onTimeout Wait)"},
		{name: "Wait: blocked already on record, no second event",
			pool: pool(nodepoolv1.DrainWait, nil, nodepoolv1.NodeDrainStatus{Node: "n1", Blocked: true}), drains: []NodeDrain{drain(40 * time.Minute)}, blocked: true},
		{name: "Halt: past the timeout the rollout halts, recorded",
			pool: pool(nodepoolv1.DrainHalt, nil), drains: []NodeDrain{drain(31 * time.Minute)}, blocked: true, event: "halting the rollout", halt: true, record: "new/m1"},
		{name: "Halt: a recorded halt holds once the drain is gone",
			pool: pool(nodepoolv1.DrainHalt, map[string]string{nodepoolv1.AnnotationDrainHalted: "new/m1"}), halt: true},
		{name: "Halt: a halt of another rollout is over",
			pool: pool(nodepoolv1.DrainHalt, map[string]string{nodepoolv1.AnnotationDrainHalted: "old/m1"})},
		{name: "Halt: once resumed the drain that halted it halts nothing more",
			pool:   pool(nodepoolv1.DrainHalt, map[string]string{nodepoolv1.AnnotationDrainHalted: "new/m1/resumed"}, nodepoolv1.NodeDrainStatus{Node: "n1", Blocked: true}),
			drains: []NodeDrain{drain(40 * time.Minute)}, blocked: true},
		{name: "Halt: a drain still blocked from a superseded rollout holds the next one too: it halts it",
			pool:   pool(nodepoolv1.DrainHalt, map[string]string{nodepoolv1.AnnotationDrainHalted: "old/m1"}, nodepoolv1.NodeDrainStatus{Node: "n1", Blocked: true}),
			drains: []NodeDrain{drain(2 * time.Hour)}, blocked: true, halt: true, record: "new/m1"},
		{name: "Force: blocked and said, never halts",
			pool: pool(nodepoolv1.DrainForce, nil), drains: []NodeDrain{drain(31 * time.Minute)}, blocked: true, event: "forcing it (onTimeout Force)"},
		{name: "Force: a drain Cluster API forced at its timeout before the controller looked is said once it is gone",
			pool:  pool(nodepoolv1.DrainForce, nil, onRecord(30*time.Minute, false)),
			event: "node n1 (machine m1) has drained for 30m0s with pods left: pod apps/web-1 (PodDisruptionBudget web): its eviction is refused; forcing it (onTimeout Force)"},
		{name: "Force: a forced drain already said blocked is not said again",
			pool: pool(nodepoolv1.DrainForce, nil, onRecord(31*time.Minute, true))},
		{name: "Force: a drain gone within its timeout drained",
			pool: pool(nodepoolv1.DrainForce, nil, onRecord(29*time.Minute, false))},
		{name: "Wait: a drain gone past its timeout drained (Wait never forces)",
			pool: pool(nodepoolv1.DrainWait, nil, onRecord(31*time.Minute, false))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pool: tc.pool, Now: now, Drains: tc.drains}
			p := Plan{Annotations: map[string]string{}, MachineDeployment: &MachineDeploymentTarget{}}
			ds := decideDrain(in, target)
			planDrain(in, ds, &p)
			requeueDrain(in, ds, &p)
			if len(p.Drains) != len(tc.drains) || len(p.Drains) > 0 && (p.Drains[0].Blocked != tc.blocked || p.Drains[0].Pods[0].Budget != "web") {
				t.Errorf("status.drains = %+v", p.Drains)
			}
			var events []string
			for _, e := range p.Events {
				if e.Reason == nodepoolv1.EventDrainBlocked {
					events = append(events, e.Message)
				}
			}
			if tc.event == "" && len(events) > 0 || tc.event != "" && (len(events) != 1 || !strings.Contains(events[0], tc.event)) {
				t.Errorf("DrainBlocked events = %q, want %q", events, tc.event)
			}
			if (ds.Halt != nil) != tc.halt || p.MachineDeployment.Paused != tc.halt || p.RecordState[nodepoolv1.AnnotationDrainHalted] != tc.record {
				t.Errorf("halt = %+v, paused %v, recorded %q; want halt %v, record %q", ds.Halt, p.MachineDeployment.Paused, p.RecordState[nodepoolv1.AnnotationDrainHalted], tc.halt, tc.record)
			}
			halted := false
			for _, c := range p.Conditions {
				halted = halted || c.Type == nodepoolv1.ConditionRolloutHealthy && c.Reason == nodepoolv1.ReasonDrainHalted && c.Status == metav1.ConditionFalse
			}
			if halted != tc.halt {
				t.Errorf("RolloutHealthy DrainHalted = %v, want %v: %+v", halted, tc.halt, p.Conditions)
			}
			if soon := p.RequeueAfter > 0 && p.RequeueAfter <= 21*time.Minute; soon != tc.requeueSoon {
				t.Errorf("requeue after %s", p.RequeueAfter)
			}
		})
	}
}

func TestAnInPlaceDrainsRefusedEvictionsNameThePodsAndBudgets(t *testing.T) {
	got := DrainBlockers("eviction of pod apps/web-1 refused: The disruption budget web needs 1 healthy pods and has 1 currently; eviction of pod apps/db-0 failed: connection refused")
	if len(got) != 2 || got[0].Pod != "apps/web-1" || got[0].Budget != "web" || got[1].Pod != "apps/db-0" || got[1].Budget != "" || got[1].Reason != "connection refused" {
		t.Errorf("DrainBlockers = %+v", got)
	}
}
