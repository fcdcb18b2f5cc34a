package gates

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// fleetTimeout bounds a whole fleet rollout on a busy machine.
const fleetTimeout = 10 * time.Minute

// newFleetPools creates n pools of one machine, spread over namespaces
// of perNamespace pools (each with its Cluster and template), labelled
// fleet=<label>; the namespaces carry fleet-ns=<label>. It waits for all
// to settle.
func newFleetPools(t *testing.T, label string, n, perNamespace int) []*nodepoolv1.NodePool {
	t.Helper()
	ctx := context.Background()
	var pools []*nodepoolv1.NodePool
	var ns string
	for i := range n {
		if i%perNamespace == 0 {
			ns = env.NewNamespace(t)
			nsObj := &corev1.Namespace{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
				t.Fatal(err)
			}
			nsObj.Labels["fleet-ns"] = label
			if err := env.Client.Update(ctx, nsObj); err != nil {
				t.Fatal(err)
			}
			st.MustCreateCluster(t, ns, stack.ClusterName)
			st.MustCreateTemplate(t, ns, "small")
			st.MustCreate(t, stack.ConfigMap(ns, "chrony", stack.Chrony("time.corp.example")))
		}
		p := &nodepoolv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pool-%02d", i), Labels: map[string]string{"fleet": label}},
			Spec: nodepoolv1.NodePoolSpec{
				ClusterName:               stack.ClusterName,
				Replicas:                  ptr.To[int32](1),
				Release:                   nodepoolv1.Release{Version: "v1.36.3"},
				Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
				InfrastructureTemplateRef: stack.TemplateRef("small"),
			},
		}
		st.MustCreate(t, p)
		pools = append(pools, p)
	}
	for _, p := range pools {
		st.WaitForPool(t, p, fleetTimeout, "the pool settled with 1 machine", stack.PoolSettled(1))
	}
	return pools
}

// bumpPlatform changes the platform's proxy image, so every pool has
// pending drift, and waits until the pools report it.
func bumpPlatform(t *testing.T, pools []*nodepoolv1.NodePool) {
	t.Helper()
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	for _, p := range pools {
		st.WaitForPool(t, p, 2*time.Minute, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })
	}
}

func newFleetRollout(t *testing.T, label string, edit func(*nodepoolv1.FleetRollout)) *nodepoolv1.FleetRollout {
	t.Helper()
	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "fr-" + label},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": label}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-ns": label}},
			Waves:             []intstr.IntOrString{intstr.FromString("100%")},
		},
	}
	if edit != nil {
		edit(fr)
	}
	st.MustCreate(t, fr)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), fr) })
	return fr
}

func readFleetRollout(t *testing.T, fr *nodepoolv1.FleetRollout) *nodepoolv1.FleetRollout {
	t.Helper()
	out := &nodepoolv1.FleetRollout{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(fr), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func waitForFleet(t *testing.T, fr *nodepoolv1.FleetRollout, timeout time.Duration, what string, ok func(*nodepoolv1.FleetRollout) bool) *nodepoolv1.FleetRollout {
	t.Helper()
	return stack.WaitFor(t, timeout, what, func() *nodepoolv1.FleetRollout { return readFleetRollout(t, fr) }, ok, describeFleet)
}

func describeFleet(fr *nodepoolv1.FleetRollout) string {
	var waves []string
	for _, w := range fr.Status.Waves {
		waves = append(waves, fmt.Sprintf("w%d[pending %d waiting %d rolling %d done %d skipped %d failed %d]", w.Wave, w.Pending, w.Waiting, w.Rolling, w.Done, w.Skipped, w.Failed))
	}
	return fmt.Sprintf("phase %s (%s); %s", fr.Status.Phase, fr.Status.Message, strings.Join(waves, " "))
}

func phaseIs(p nodepoolv1.FleetRolloutPhase) func(*nodepoolv1.FleetRollout) bool {
	return func(fr *nodepoolv1.FleetRollout) bool { return fr.Status.Phase == p }
}

// fleetRecords are the pool's history records the fleet rollout started.
func fleetRecords(t *testing.T, p *nodepoolv1.NodePool, fr *nodepoolv1.FleetRollout) []history.Entry {
	t.Helper()
	var out []history.Entry
	for _, e := range st.HistoryOf(t, p) {
		if e.Initiator == nodepoolv1.FleetRolloutInitiator(fr.Name) {
			out = append(out, e)
		}
	}
	return out
}

func TestAFleetRolloutRollsWaveByWaveAndNoLaterWaveStartsBeforeTheEarlierOneCompletedAndSoaked(t *testing.T) {
	const label, soak = "waves", 10 * time.Second
	pools := newFleetPools(t, label, 21, 7)
	// A pool of the label in a namespace the namespace selector does not
	// select stays out.
	outside := st.NewPoolWith(t, "outside", 1, func(_ string, p *nodepoolv1.NodePool) { p.Labels = map[string]string{"fleet": label} })
	st.WaitForPool(t, outside, fleetTimeout, "settled", stack.PoolSettled(1))
	bumpPlatform(t, append(pools, outside))
	before := map[string]stack.PoolState{}
	for _, p := range pools {
		before[p.Namespace+"/"+p.Name] = st.Observe(t, p)
	}

	fr := newFleetRollout(t, label, func(fr *nodepoolv1.FleetRollout) {
		fr.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("25%"), intstr.FromString("100%")}
		fr.Spec.Soak = &metav1.Duration{Duration: soak}
	})
	done := waitForFleet(t, fr, fleetTimeout, "the fleet rollout complete", phaseIs(nodepoolv1.FleetPhaseComplete))

	// The selection: 21 pools, waves of 1, 5 (ceil 25% of 21 = 6, minus 1) and 15.
	if stack.FleetSelected(done) != 21 || len(stack.FleetPoolsAgreeing(t, env.Client, done)) != 21 {
		t.Fatalf("selected %d pools, want 21: %s", stack.FleetSelected(done), describeFleet(done))
	}
	sizes := []int32{1, 5, 15}
	for i, w := range done.Status.Waves {
		if w.Pools != sizes[i] || w.Done != sizes[i] || w.StartedAt == nil || w.CompletedAt == nil {
			t.Fatalf("wave %d: %+v, want %d pools done", w.Wave, w, sizes[i])
		}
		if i > 0 && w.StartedAt.Before(ptr.To(metav1.NewTime(done.Status.Waves[i-1].CompletedAt.Add(soak)))) {
			t.Fatalf("wave %d started at %s, before wave %d completed (%s) and soaked %s", w.Wave, w.StartedAt, i, done.Status.Waves[i-1].CompletedAt, soak)
		}
	}
	// Each pool's history: one rollout of the fleet rollout, complete; a
	// later wave's started only after every pool of the earlier wave
	// completed plus the soak (records have a resolution of a second).
	byKey := map[string]*nodepoolv1.NodePool{}
	for _, p := range pools {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	completed := map[int32]time.Time{}
	started := map[int32][]time.Time{}
	for _, sp := range stack.FleetPoolsAgreeing(t, env.Client, done) {
		p := byKey[sp.Namespace+"/"+sp.Name]
		recs := fleetRecords(t, p, fr)
		if len(recs) != 1 || recs[0].Outcome != history.OutcomeComplete || recs[0].Completed == nil || sp.State != nodepoolv1.FleetPoolDone {
			t.Fatalf("pool %s: state %s, fleet records %+v; want exactly one, complete", p.Name, sp.State, recs)
		}
		if !sp.TriggeredAt.Equal(ptr.To(metav1.NewTime(*recs[0].ForcedAt))) || sp.Revision != recs[0].Revision {
			t.Fatalf("pool %s: status %+v does not name its record %+v", p.Name, sp, recs[0])
		}
		if c := *recs[0].Completed; c.After(completed[sp.Wave]) {
			completed[sp.Wave] = c
		}
		started[sp.Wave] = append(started[sp.Wave], recs[0].Started)
		s := st.Observe(t, p)
		if !stack.PoolSettled(1)(s) || s.Machines.Intersection(before[p.Namespace+"/"+p.Name].Machines).Len() != 0 {
			t.Fatalf("pool %s: machine not replaced: %s", p.Name, s)
		}
	}
	for w := int32(2); w <= 3; w++ {
		sort.Slice(started[w], func(i, j int) bool { return started[w][i].Before(started[w][j]) })
		if first, limit := started[w][0], completed[w-1].Add(soak-time.Second); first.Before(limit) {
			t.Fatalf("a pool of wave %d started at %s, before wave %d's last pool completed (%s) plus the soak", w, first, w-1, completed[w-1])
		}
	}
	if h := fleetRecords(t, outside, fr); len(h) != 0 || holds(t, done, outside) {
		t.Fatalf("a pool outside the namespace selector was rolled: %+v", h)
	}
	// Every pool is released: no fleet-rollout annotation remains.
	for _, p := range pools {
		if s := st.Observe(t, p); s.Pool.Annotations[nodepoolv1.AnnotationFleetRollout] != "" {
			t.Fatalf("pool %s still carries the fleet-rollout annotation", p.Name)
		}
	}
}

func holds(t *testing.T, fr *nodepoolv1.FleetRollout, p *nodepoolv1.NodePool) bool {
	for _, sp := range stack.FleetPools(t, env.Client, fr) {
		if sp.Namespace == p.Namespace && sp.Name == p.Name {
			return true
		}
	}
	return false
}

func TestAPausedFleetRolloutTriggersNothingAResumeRollsAndACancelStopsTheRest(t *testing.T) {
	const label = "pause"
	pools := newFleetPools(t, label, 4, 4)
	bumpPlatform(t, pools)
	fr := newFleetRollout(t, label, func(fr *nodepoolv1.FleetRollout) {
		fr.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")}
		fr.Spec.Soak = &metav1.Duration{Duration: time.Hour}
		fr.Spec.Paused = true
	})
	paused := waitForFleet(t, fr, time.Minute, "paused with its selection recorded", func(fr *nodepoolv1.FleetRollout) bool {
		return fr.Status.Phase == nodepoolv1.FleetPhasePaused && stack.FleetSelected(fr) == 4
	})
	end := time.Now().Add(6 * time.Second)
	for time.Now().Before(end) {
		for _, p := range pools {
			if recs := fleetRecords(t, p, fr); len(recs) != 0 {
				t.Fatalf("pool %s rolled while the fleet rollout was paused: %s", p.Name, describeFleet(paused))
			}
		}
		time.Sleep(time.Second)
	}

	stack.Update(t, env.Client, fr, func(fr *nodepoolv1.FleetRollout) { fr.Spec.Paused = false })
	soaking := waitForFleet(t, fr, fleetTimeout, "wave 1 done, soaking", phaseIs(nodepoolv1.FleetPhaseSoaking))
	first := pools[0]
	if sp := stack.FleetPoolsAgreeing(t, env.Client, soaking); sp[0].Name != first.Name || sp[0].State != nodepoolv1.FleetPoolDone {
		t.Fatalf("wave 1: %+v", sp[0])
	}
	st.LastRecord(t, first, nodepoolv1.FleetRolloutInitiator(fr.Name), history.OutcomeComplete)
	// The pool it triggered says so in an event naming the fleet rollout.
	evs := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), evs, client.InNamespace(first.Namespace)); err != nil {
		t.Fatal(err)
	}
	triggered := false
	for _, e := range evs.Items {
		if e.Reason == nodepoolv1.EventFleetPoolTriggered && e.Regarding.Name == first.Name && strings.Contains(e.Note, "fleet rollout "+fr.Name) {
			triggered = true
		}
	}
	if !triggered {
		t.Errorf("no %s event on pool %s", nodepoolv1.EventFleetPoolTriggered, first.Name)
	}

	stack.Update(t, env.Client, fr, func(fr *nodepoolv1.FleetRollout) { fr.Spec.Cancelled = true })
	cancelled := waitForFleet(t, fr, time.Minute, "cancelled", phaseIs(nodepoolv1.FleetPhaseCancelled))
	if cancelled.Status.Waves[1].Skipped != 3 || cancelled.Status.CompletedAt == nil {
		t.Fatalf("wave 2 after the cancel: %s", describeFleet(cancelled))
	}
	st.HoldsFor(t, pools[1], 6*time.Second, "no pool of wave 2 rolls after the cancel", func(s stack.PoolState) bool {
		return s.Pool.Annotations[nodepoolv1.AnnotationApplyPending] == "" && s.Pool.Status.Updating == ""
	})
	for _, p := range pools[1:] {
		if recs := fleetRecords(t, p, fr); len(recs) != 0 {
			t.Fatalf("pool %s rolled: %+v", p.Name, recs)
		}
	}
}

func TestAPoolLeftAnnotatedByADeletedFleetRolloutIsTakenOverByTheNextOne(t *testing.T) {
	const label = "takeover"
	pools := newFleetPools(t, label, 2, 2)
	// A fleet rollout deleted while it drove the pool left its name.
	stack.Update(t, env.Client, pools[0], func(p *nodepoolv1.NodePool) { p.Annotations[nodepoolv1.AnnotationFleetRollout] = "deleted-long-ago" })
	fr := newFleetRollout(t, label, func(fr *nodepoolv1.FleetRollout) { fr.Spec.Action = nodepoolv1.FleetActionRestart })
	done := waitForFleet(t, fr, fleetTimeout, "complete", phaseIs(nodepoolv1.FleetPhaseComplete))
	for _, p := range pools {
		if recs := fleetRecords(t, p, fr); len(recs) != 1 || recs[0].Outcome != history.OutcomeComplete {
			t.Fatalf("pool %s: records %+v; %s", p.Name, recs, describeFleet(done))
		}
	}
}
