package gates

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

// shiftClock is real time moved by an offset the test sets: the controller
// sees a window open without the test waiting for it. Cluster API keeps
// real time, so a forced rollout's time must not be ahead of it.
type shiftClock struct{ offset atomic.Int64 }

func (c *shiftClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// set makes the clock read t now.
func (c *shiftClock) set(t time.Time) { c.offset.Store(int64(time.Until(t))) }

// windowController runs the controller on a shifted clock, looking at
// every pool at least every 2 seconds so a clock move is seen at once.
func windowController(t *testing.T) *shiftClock {
	t.Helper()
	clock := &shiftClock{}
	s := settings
	s.Clock = clock.now
	s.ResyncPeriod = 2 * time.Second
	st.MustRestartController(t, s)
	t.Cleanup(func() { st.MustRestartController(t, settings) })
	return clock
}

func reasonOf(typ, reason string) func(stack.PoolState) bool {
	return func(s stack.PoolState) bool { return stack.Condition(s.Pool, typ).Reason == reason }
}

func replacedFrom(before stack.PoolState, n int) func(stack.PoolState) bool {
	return func(s stack.PoolState) bool {
		return stack.PoolSettled(n)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	}
}

func bumpProxy(t *testing.T) {
	t.Helper()
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
}

func countInitiator(h []history.Entry, initiator rollout.Initiator) int {
	n := 0
	for _, e := range h {
		if e.Initiator == string(initiator) {
			n++
		}
	}
	return n
}

// A pool whose window opens daily three hours from now, Berlin time:
// platform drift waits for the window and rolls once in it; an owner
// change rolls at once by default and waits for the window once the owner
// opted in; the emergency path rolls outside the window with its reason
// in the history.
func TestPlatformRolloutsWaitForTheWindowAndOwnerChangesOnlyWhenOptedIn(t *testing.T) {
	clock := windowController(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	opens := time.Now().In(berlin).Truncate(time.Hour).Add(3 * time.Hour)
	p := st.NewPoolWith(t, "workers", 1, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
			Schedule: fmt.Sprintf("0 %d * * *", opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"}}}
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node, outside the window", func(s stack.PoolState) bool {
		st := s.Pool.Status.Maintenance
		return stack.PoolSettled(1)(s) && reasonOf(nodepoolv1.ConditionMaintenanceWindow, nodepoolv1.ReasonOutsideMaintenanceWindow)(s) &&
			st != nil && st.NextWindow != nil && st.NextWindow.Start.Equal(&metav1.Time{Time: opens})
	})

	// The owner's change rolls at once by default.
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp1.corp.example") })
	before = st.WaitForPool(t, p, stack.RolloutTimeout, "the owner change rolled outside the window", replacedFrom(before, 1))

	// The platform's waits for the window.
	bumpProxy(t)
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	st.WaitForPool(t, p, 30*time.Second, "apply-pending held by the window",
		reasonOf(nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ReasonOutsideMaintenanceWindow))
	st.HoldsFor(t, p, 6*time.Second, "nothing replaced outside the window", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines) && strings.Contains(stack.Condition(s.Pool, nodepoolv1.ConditionMaintenanceWindow).Message, "waiting: a rollout (platform)")
	})
	clock.set(opens.Add(-3 * time.Second))
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "the platform rollout done in the window", func(s stack.PoolState) bool {
		return replacedFrom(before, 1)(s) && stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse &&
			stack.IsTrue(s.Pool, nodepoolv1.ConditionMaintenanceWindow)
	})
	st.HoldsFor(t, p, 6*time.Second, "rolled once only", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
	st.LastRecord(t, p, string(rollout.InitiatorPlatform), history.OutcomeComplete)
	if n := countInitiator(st.HistoryOf(t, p), rollout.InitiatorPlatform); n != 1 {
		t.Errorf("%d platform rollouts recorded, want 1", n)
	}

	// Once the owner opts in, the owner's change waits for the window too.
	clock.set(opens.Add(2 * time.Hour))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
	})
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp2.corp.example") })
	st.WaitForPool(t, p, 30*time.Second, "the owner change held by the window",
		reasonOf(nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ReasonOutsideMaintenanceWindow))
	st.HoldsFor(t, p, 6*time.Second, "nothing replaced outside the window", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
	clock.set(opens.Add(24*time.Hour - 3*time.Second))
	after = st.WaitForPool(t, p, stack.RolloutTimeout, "the owner change rolled in the next window", replacedFrom(after, 1))
	st.LastRecord(t, p, string(rollout.InitiatorSpec), history.OutcomeComplete)

	// The emergency path: outside the window, with a reason.
	clock.set(opens.Add(26 * time.Hour))
	bumpProxy(t)
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = now
		p.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = now
		p.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] = "CVE-2026-1234 in the API-server proxy"
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "the emergency rollout done outside the window", replacedFrom(after, 1))
	e := st.LastRecord(t, p, string(rollout.InitiatorPlatform), history.OutcomeComplete)
	if !strings.Contains(e.Reason, "CVE-2026-1234 in the API-server proxy") {
		t.Errorf("the history record's reason is %q, want the emergency's", e.Reason)
	}
}
