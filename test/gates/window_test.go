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

// A pool with a window every ten minutes and an exclusion over one of
// them: drift older than its one-hour deadline is held by the exclusion
// across that window, then applied at the first window after it,
// recorded with initiator deadline.
func TestAnExclusionHoldsTheDriftDeadlineUntilTheFirstWindowAfterIt(t *testing.T) {
	clock := windowController(t)
	// The window the deadline rolls in opens in real time: Cluster API
	// compares the forced rollout's time with its own clock.
	opens := time.Now().Add(100 * time.Second).Truncate(time.Minute).Add(time.Minute)
	p := st.NewPoolWith(t, "workers", 1, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
			Windows: []nodepoolv1.MaintenanceWindow{{Schedule: fmt.Sprintf("%d/10 * * * *", opens.Minute()%10), Duration: metav1.Duration{Duration: 3 * time.Minute}}},
			Exclusions: []nodepoolv1.MaintenanceExclusion{{Name: "db-migration", Scope: nodepoolv1.ExclusionScopePlatform,
				Start: metav1.NewTime(opens.Add(-12 * time.Minute)), End: metav1.NewTime(opens.Add(-5 * time.Minute))}},
			DriftDeadline: &metav1.Duration{Duration: time.Hour},
		}
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))

	// Drift first seen 75 minutes before the window: its deadline passes
	// 15 minutes before it.
	clock.set(opens.Add(-75 * time.Minute))
	bumpProxy(t)
	deadline := opens.Add(-15 * time.Minute)
	st.WaitForPool(t, p, 30*time.Second, "drift reported with its deadline", func(s stack.PoolState) bool {
		st := s.Pool.Status.Maintenance
		return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) && st != nil && st.DriftDeadline != nil &&
			st.DriftDeadline.Sub(deadline).Abs() < 10*time.Second
	})

	// The window ten minutes before is inside the exclusion.
	clock.set(opens.Add(-10*time.Minute + 20*time.Second))
	st.WaitForPool(t, p, 30*time.Second, "the deadline held by the exclusion", func(s stack.PoolState) bool {
		return reasonOf(nodepoolv1.ConditionMaintenanceWindow, nodepoolv1.ReasonInMaintenanceExclusion)(s) &&
			reasonOf(nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ReasonInMaintenanceExclusion)(s)
	})
	st.HoldsFor(t, p, 6*time.Second, "nothing replaced during the exclusion", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })

	// Back to real time: the next window opens at opens.
	clock.offset.Store(0)
	if time.Now().After(opens) {
		t.Fatalf("the steps before took too long: the window at %s has begun", opens.Format(time.RFC3339))
	}
	st.WaitForPool(t, p, 30*time.Second, "waiting for the next window", func(s stack.PoolState) bool {
		st := s.Pool.Status.Maintenance
		return reasonOf(nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ReasonOutsideMaintenanceWindow)(s) &&
			st != nil && st.NextWindow != nil && st.NextWindow.Start.Time.Equal(opens) && strings.Contains(st.Waiting, "(deadline)")
	})
	st.HoldsFor(t, p, time.Until(opens)-2*time.Second, "nothing replaced before the window", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
	st.WaitForPool(t, p, stack.RolloutTimeout, "the drift applied in the window", func(s stack.PoolState) bool {
		return replacedFrom(before, 1)(s) && stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	e := st.LastRecord(t, p, string(rollout.InitiatorDeadline), history.OutcomeComplete)
	if e.ForcedAt == nil || !e.ForcedAt.Equal(opens) || !strings.Contains(e.Reason, "driftDeadline") {
		t.Errorf("record forcedAt %v reason %q, want machines older than the window's opening %v replaced, for the deadline", e.ForcedAt, e.Reason, opens)
	}
}
