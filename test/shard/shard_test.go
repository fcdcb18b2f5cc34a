// Package shard runs two sharded NodePool controllers on one API server and
// checks that each acts only on the pools of its own namespaces.
package shard

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/stack"
)

// startShard runs a NodePool controller owning the pools of namespaces, as
// `nodepool controller --shard name --namespaces ...` does, until the test
// ends; settings.Shard.FleetRollouts is --fleet-rollouts.
func startShard(t *testing.T, env *harness.Env, settings controller.Settings, name string, namespaces ...string) {
	t.Helper()
	settings.Shard = controller.Shard{Name: name, Namespaces: namespaces, FleetRollouts: settings.Shard.FleetRollouts}
	if err := settings.Shard.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = settings.Shard.FieldManager() + "/test"
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Cache: settings.Shard.CacheOptions(controller.CacheOptions(), settings.Inputs.ManagementConfig),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: &skip},
		LeaderElection: true, LeaderElectionID: settings.Shard.LeaderElectionID(), LeaderElectionNamespace: inputs.DefaultManagementConfig.Namespace,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(env.Context())
	if err := controller.Setup(ctx, mgr, settings, ctrlcontroller.Options{MaxConcurrentReconciles: 4}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// startControlPlane starts the test control plane with the management
// config in place (skipping outside make test), and a must that fails the
// test on an error.
func startControlPlane(t *testing.T, opts harness.Options) (*harness.Env, func(error)) {
	t.Helper()
	if os.Getenv("NODEPOOL_ASSETS") == "" {
		t.Skip("NODEPOOL_ASSETS is not set: run through make test")
	}
	ctx := context.Background()
	env, err := harness.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inputs.DefaultManagementConfig.Namespace}}))
	must(env.Client.Create(ctx, stack.ManagementConfig("registry.example/haproxy@sha256:"+strings.Repeat("a", 64))))
	return env, must
}

func TestTwoShardsNeverBothActOnAPool(t *testing.T) {
	ctx := context.Background()
	env, must := startControlPlane(t, harness.Options{})
	c := env.Client
	ca, err := testpki.NewCA("shard test")
	must(err)
	settings := controller.Settings{
		Inputs:       inputs.Settings{PayloadServerURL: "https://payload.example:8443/ignition", PayloadServerCA: ca.PEM, RendererVersion: "test"},
		ResyncPeriod: 3 * time.Second,
	}
	shards := map[string][]string{"a": {"team-a1", "team-a2"}, "b": {"team-b"}}
	pools := map[string]string{} // namespace/name -> shard
	for shard, namespaces := range shards {
		for _, ns := range namespaces {
			must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			_, err := simtest.CreateCluster(ctx, c, ns, "c1")
			must(err)
			must(simtest.CreateMachineTemplate(ctx, c, ns, "small", simv1.SimMachineSpec{}))
			for i := range 3 {
				must(c.Create(ctx, newPool(ns, fmt.Sprintf("pool-%d", i))))
				pools[ns+"/"+fmt.Sprintf("pool-%d", i)] = shard
			}
		}
	}
	// A pool in the management config's namespace: both shards cache that
	// namespace (for the ConfigMap), neither owns it.
	_, err = simtest.CreateCluster(ctx, c, inputs.DefaultManagementConfig.Namespace, "c1")
	must(err)
	orphan := newPool(inputs.DefaultManagementConfig.Namespace, "nobodys")
	must(c.Create(ctx, orphan))
	for shard, namespaces := range shards {
		startShard(t, env, settings, shard, namespaces...)
	}

	stack.WaitFor(t, 3*time.Minute, "every pool of both shards ready", func() int {
		ready := 0
		for key := range pools {
			ns, name, _ := strings.Cut(key, "/")
			p := &nodepoolv1.NodePool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err == nil &&
				meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionReady) && p.Status.ObservedGeneration == p.Generation {
				ready++
			}
		}
		return ready
	}, func(n int) bool { return n == len(pools) }, func(n int) string { return fmt.Sprintf("%d of %d ready", n, len(pools)) })
	time.Sleep(2 * settings.ResyncPeriod) // a resync of every pool by both shards' informers

	managers := func(o client.Object) []string {
		var out []string
		for _, f := range o.GetManagedFields() {
			if strings.HasPrefix(f.Manager, "nodepool-controller") && !slices.Contains(out, f.Manager) {
				out = append(out, f.Manager)
			}
		}
		return out
	}
	for key, shard := range pools {
		ns, name, _ := strings.Cut(key, "/")
		want := []string{controller.Shard{Name: shard}.FieldManager()}
		p := &nodepoolv1.NodePool{}
		must(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p))
		objs := []client.Object{p}
		md := &clusterv1.MachineDeployment{}
		must(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md))
		objs = append(objs, md)
		secrets := &corev1.SecretList{}
		must(c.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{nodepoolv1.LabelPool: name}))
		if len(secrets.Items) == 0 {
			t.Errorf("pool %s has no Secrets", key)
		}
		for i := range secrets.Items {
			objs = append(objs, &secrets.Items[i])
		}
		for _, o := range objs {
			if got := managers(o); !slices.Equal(got, want) {
				t.Errorf("%T %s/%s of pool %s (shard %s) was written by %v; want only %v", o, o.GetNamespace(), o.GetName(), key, shard, got, want)
			}
		}
	}
	events := &eventsv1.EventList{}
	must(c.List(ctx, events))
	for _, e := range events.Items {
		if e.Regarding.Kind != "NodePool" {
			continue
		}
		shard, ok := pools[e.Regarding.Namespace+"/"+e.Regarding.Name]
		if want := (controller.Shard{Name: shard}).FieldManager(); ok && e.ReportingController != want {
			t.Errorf("event %s on pool %s/%s reported by %s; want %s", e.Reason, e.Regarding.Namespace, e.Regarding.Name, e.ReportingController, want)
		}
		if !ok {
			t.Errorf("event %s on pool %s/%s that no shard owns, by %s", e.Reason, e.Regarding.Namespace, e.Regarding.Name, e.ReportingController)
		}
	}
	must(c.Get(ctx, client.ObjectKeyFromObject(orphan), orphan))
	if len(orphan.Finalizers) > 0 || len(orphan.Status.Conditions) > 0 || len(managers(orphan)) > 0 {
		t.Errorf("a pool no shard owns was acted on: finalizers %v, conditions %d, managers %v", orphan.Finalizers, len(orphan.Status.Conditions), managers(orphan))
	}
}

func newPool(ns, name string) *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName: "c1", Replicas: ptr.To[int32](0), Release: nodepoolv1.Release{Version: "v1.36.3"},
			InfrastructureTemplateRef: nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: "small"},
		},
	}
}
