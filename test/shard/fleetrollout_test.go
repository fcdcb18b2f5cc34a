package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/stack"
)

// A fleet split over two shards runs one FleetRollout: shard a, started
// with --fleet-rollouts, selects and triggers the pools of both shards
// through their annotations; each pool's own shard carries its trigger
// out (its one machine is replaced), and the rollout completes on every
// pool.
func TestAFleetRolloutCompletesOnThePoolsOfEveryShard(t *testing.T) {
	ctx := context.Background()
	env, must := startControlPlane(t, harness.Options{AddToScheme: []func(*runtime.Scheme) error{sim.AddToScheme}})
	c := env.Client
	// Machines boot: the sim provider, and a payload server they fetch from.
	ps, err := simtest.StartPayloadServer(env.Context(), env.Config, t.TempDir(), ctrl.Log.WithName("payload-server"))
	must(err)
	must(stack.RunSim(env, sim.Options{InitialRetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}))
	settings := controller.Settings{
		Inputs:       inputs.Settings{PayloadServerURL: ps.URL, PayloadServerCA: ps.CA, RendererVersion: "test"},
		ResyncPeriod: 30 * time.Second,
	}
	shards := map[string][]string{"a": {"fleet-a1", "fleet-a2"}, "b": {"fleet-b"}}
	pools := map[client.ObjectKey]string{} // pool -> its shard
	for shard, namespaces := range shards {
		for _, ns := range namespaces {
			must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			_, err := simtest.CreateCluster(ctx, c, ns, "c1")
			must(err)
			must(simtest.CreateMachineTemplate(ctx, c, ns, "small", simv1.SimMachineSpec{}))
			for i := range 2 {
				p := newPool(ns, fmt.Sprintf("pool-%d", i))
				p.Labels, p.Spec.Replicas = map[string]string{"tier": "fleet"}, ptr.To[int32](1)
				must(c.Create(ctx, p))
				pools[client.ObjectKeyFromObject(p)] = shard
			}
		}
	}
	fleetSettings := settings
	fleetSettings.Shard.FleetRollouts = true
	startShard(t, env, fleetSettings, "a", shards["a"]...)
	startShard(t, env, settings, "b", shards["b"]...)

	stack.WaitFor(t, 5*time.Minute, "every pool of both shards settled", func() int {
		settled := 0
		for key := range pools {
			p := &nodepoolv1.NodePool{}
			if err := c.Get(ctx, key, p); err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionReady) &&
				p.Status.ObservedGeneration == p.Generation && p.Status.Rollout != nil && p.Status.Rollout.Settled && p.Status.ReadyReplicas == 1 {
				settled++
			}
		}
		return settled
	}, func(n int) bool { return n == len(pools) }, func(n int) string { return fmt.Sprintf("%d of %d settled", n, len(pools)) })

	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "across-shards"},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fleet"}},
			Action:       nodepoolv1.FleetActionRestart,
			Waves:        []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
		},
	}
	must(c.Create(ctx, fr))
	done := stack.WaitFor(t, 10*time.Minute, "the fleet rollout complete", func() *nodepoolv1.FleetRollout {
		got := &nodepoolv1.FleetRollout{}
		must(c.Get(ctx, client.ObjectKeyFromObject(fr), got))
		return got
	}, func(got *nodepoolv1.FleetRollout) bool {
		return got.Status.Phase == nodepoolv1.FleetPhaseComplete || got.Status.Phase == nodepoolv1.FleetPhaseCancelled
	}, func(got *nodepoolv1.FleetRollout) string {
		return fmt.Sprintf("phase %s: %s", got.Status.Phase, got.Status.Message)
	})
	if done.Status.Phase != nodepoolv1.FleetPhaseComplete {
		t.Fatalf("the fleet rollout ended %s: %s", done.Status.Phase, done.Status.Message)
	}
	if got := stack.FleetSelected(done); got != len(pools) {
		t.Errorf("the fleet rollout selected %d pools, want the %d of both shards", got, len(pools))
	}
	members := stack.FleetPoolsAgreeing(t, c, done)
	if len(members) != len(pools) {
		t.Errorf("%d pools are members of the fleet rollout, want %d", len(members), len(pools))
	}
	for _, m := range members {
		if m.State != nodepoolv1.FleetPoolDone {
			t.Errorf("pool %s/%s ended %s (%s), want Done", m.Namespace, m.Name, m.State, m.Message)
		}
	}

	// Each trigger was carried out by the pool's own shard: the pool's
	// history has the rollout the fleet rollout started, recorded by its
	// shard and no other. The rollout's status is the fleet shard's.
	for key, shard := range pools {
		p := &nodepoolv1.NodePool{}
		must(c.Get(ctx, key, p))
		crs := &appsv1.ControllerRevisionList{}
		must(c.List(ctx, crs, client.InNamespace(key.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: key.Name}))
		want := controller.Shard{Name: shard}.FieldManager()
		carried := false
		for i := range crs.Items {
			cr := &crs.Items[i]
			if !history.IsRecord(p, cr) {
				continue
			}
			e, err := history.Decode(cr)
			must(err)
			if e.Initiator != nodepoolv1.FleetRolloutInitiator(fr.Name) {
				continue
			}
			carried = true
			for _, f := range cr.GetManagedFields() {
				if f.Manager != want {
					t.Errorf("pool %s (shard %s): the fleet rollout's record %s was written by %s", key, shard, cr.Name, f.Manager)
				}
			}
		}
		if !carried {
			t.Errorf("pool %s (shard %s): no history record of the fleet rollout: its trigger was not carried out", key, shard)
		}
	}
	var managers []string
	for _, f := range done.GetManagedFields() {
		if f.Subresource == "status" && !slices.Contains(managers, f.Manager) {
			managers = append(managers, f.Manager)
		}
	}
	if want := (controller.Shard{Name: "a"}).FieldManager(); !slices.Equal(managers, []string{want}) {
		t.Errorf("the fleet rollout's status was written by %v, want only %s (the shard given --fleet-rollouts)", managers, want)
	}

	// A platform bump in a sharded fleet is announced once, on the
	// management config, by the shard given --fleet-rollouts: no pool
	// gets an event of it, and the other shard says nothing.
	cm := &corev1.ConfigMap{}
	must(c.Get(ctx, inputs.DefaultManagementConfig, cm))
	cm.Data = stack.ManagementConfig("registry.example/haproxy@sha256:" + strings.Repeat("b", 64)).Data
	must(c.Update(ctx, cm))
	stack.WaitFor(t, 5*time.Minute, "every pool of both shards shows the bump's drift", func() int {
		drifting := 0
		for key := range pools {
			p := &nodepoolv1.NodePool{}
			if err := c.Get(ctx, key, p); err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionConfigUpdatePending) {
				drifting++
			}
		}
		return drifting
	}, func(n int) bool { return n == len(pools) }, func(n int) string { return fmt.Sprintf("%d of %d drifting", n, len(pools)) })
	announced := stack.WaitFor(t, 2*time.Minute, "the bump's ManagementConfigChanged event", func() []eventsv1.Event {
		events := &eventsv1.EventList{}
		must(c.List(ctx, events, client.InNamespace(inputs.DefaultManagementConfig.Namespace)))
		var out []eventsv1.Event
		for _, e := range events.Items {
			if e.Reason == nodepoolv1.EventManagementConfigChanged {
				out = append(out, e)
			}
		}
		return out
	}, func(es []eventsv1.Event) bool { return len(es) > 0 }, func(es []eventsv1.Event) string { return fmt.Sprintf("%d events", len(es)) })
	time.Sleep(10 * time.Second) // time for a second announcement, were there one
	events := &eventsv1.EventList{}
	must(c.List(ctx, events))
	var got []string
	for _, e := range events.Items {
		if e.Reason == nodepoolv1.EventManagementConfigChanged || e.Reason == nodepoolv1.EventManagementConfigDrift {
			got = append(got, fmt.Sprintf("%s on %s %s/%s by %s (x%d)", e.Reason, e.Regarding.Kind, e.Regarding.Namespace, e.Regarding.Name, e.ReportingController, max(1, e.DeprecatedCount)))
		}
	}
	want := fmt.Sprintf("%s on ConfigMap %s by %s (x1)", nodepoolv1.EventManagementConfigChanged, inputs.DefaultManagementConfig, controller.Shard{Name: "a"}.FieldManager())
	if len(announced) == 0 || !slices.Equal(got, []string{want}) {
		t.Errorf("the bump's events are %q; want only %q", got, want)
	}
}
