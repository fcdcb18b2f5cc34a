package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
)

// writeCounter counts the API requests that change something.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		w.writes.Add(1)
	}
	return w.next.RoundTrip(r)
}

// BenchmarkFleetOfPools runs the controller over a fleet of pools with no
// machines (NODEPOOL_BENCH_POOLS, default 1000; every other one InPlace)
// and reports:
//   - the API writes of a full resync of settled pools (a restart of the
//     controller reconciles every pool): must be 0;
//   - the time of that full resync;
//   - after a management bump (the API-server proxy image), the time until
//     every pool reports the drift, and how many MachineDeployments (or
//     InPlace MachineSets) were pointed at new user-data (must be 0).
func BenchmarkFleetOfPools(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("NODEPOOL_BENCH_POOLS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	env, err := harness.Start(ctx, harness.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	skip := true
	simMgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.SetupWithManager(env.Context(), simMgr, sim.Options{}); err != nil {
		b.Fatal(err)
	}
	env.Run(simMgr)

	ca, err := testpki.NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inputs.DefaultManagementConfig.Namespace}}))
	mc := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name},
		Data: map[string]string{inputs.ManagementConfigKey: fmt.Sprintf("apiServerProxyImage: registry.example/haproxy@sha256:%064x\n", 1)}}
	must(c.Create(ctx, mc))
	const ns = "fleet"
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	_, err = simtest.CreateCluster(ctx, c, ns, "c1")
	must(err)
	must(simtest.CreateMachineTemplate(ctx, c, ns, "small", simv1.SimMachineSpec{}))
	must(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chrony"},
		Data: map[string]string{inputs.ConfigKey: "ignition: {version: 3.4.0}\nstorage: {files: [{path: /etc/chrony.conf, contents: {source: \"data:,server%20ntp\"}}]}\n"}}))

	settings := controller.Settings{
		Inputs:       inputs.Settings{PayloadServerURL: "https://payload.example:8443/ignition", PayloadServerCA: ca.PEM, RendererVersion: "bench"},
		ResyncPeriod: time.Hour,
	}
	counter := &writeCounter{}
	start := func() (func(), error) {
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Cache: controller.CacheOptions(),
			Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: &skip}})
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithCancel(env.Context())
		if err := controller.Setup(cctx, mgr, settings, ctrlcontroller.Options{MaxConcurrentReconciles: 8}); err != nil {
			cancel()
			return nil, err
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(cctx) }()
		return func() { cancel(); <-done }, nil
	}
	stop, err := start()
	must(err)

	t0 := time.Now()
	for i := range n {
		p := &nodepoolv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pool-%04d", i)},
			Spec: nodepoolv1.NodePoolSpec{
				ClusterName: "c1", Replicas: ptr.To[int32](0), Release: nodepoolv1.Release{Version: "v1.36.3"},
				Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
				InfrastructureTemplateRef: nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: "small"},
			},
		}
		if i%2 == 1 {
			p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
		}
		must(c.Create(ctx, p))
	}
	waitAll(b, c, ns, n, "every pool settled", func(p *nodepoolv1.NodePool) bool {
		return p.Annotations[nodepoolv1.AnnotationCurrentPayload] != "" && meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionReady) &&
			p.Status.ObservedGeneration == p.Generation
	})
	b.Logf("%d pools created and settled in %s", n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // let the last reconciles finish
	targets := dataSecretNames(b, c, ns)

	// A full resync of settled pools: restart the controller.
	stop()
	counter.writes.Store(0)
	base := reconcileCount(b)
	t1 := time.Now()
	stop, err = start()
	must(err)
	reconciled := waitReconciles(b, n, base)
	resync := time.Since(t1)
	time.Sleep(2 * time.Second)
	writes := counter.writes.Load()
	b.ReportMetric(float64(writes)/float64(n), "writes/no-op-reconcile")
	b.ReportMetric(resync.Seconds(), "s/full-resync")
	b.Logf("full resync of %d settled pools: %s (%d reconciles), %d API writes", n, resync.Round(time.Millisecond), reconciled, writes)
	if writes != 0 {
		b.Errorf("a no-op resync wrote %d times to the API server; want 0", writes)
	}

	// A management bump across the fleet.
	t2 := time.Now()
	mc.Data[inputs.ManagementConfigKey] = fmt.Sprintf("apiServerProxyImage: registry.example/haproxy@sha256:%064x\n", 2)
	must(c.Update(ctx, mc))
	waitAll(b, c, ns, n, "every pool shows the drift", func(p *nodepoolv1.NodePool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionConfigUpdatePending)
	})
	bump := time.Since(t2)
	after := dataSecretNames(b, c, ns)
	rolled := 0
	for k, v := range targets {
		if after[k] != v {
			rolled++
		}
	}
	b.ReportMetric(bump.Seconds(), "s/management-bump")
	b.ReportMetric(float64(rolled), "pools-rolled")
	b.Logf("management bump: every pool shows the drift after %s; %d pools pointed at new user-data", bump.Round(time.Millisecond), rolled)
	if rolled != 0 {
		b.Errorf("a management bump rolled %d pools", rolled)
	}
	stop()
}

func waitAll(b *testing.B, c client.Client, ns string, n int, what string, ok func(*nodepoolv1.NodePool) bool) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	for time.Now().Before(deadline) {
		list := &nodepoolv1.NodePoolList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		good := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				good++
			}
		}
		if good == n {
			return
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("timed out waiting for %s", what)
}

func dataSecretNames(b *testing.B, c client.Client, ns string) map[string]string {
	b.Helper()
	list := &clusterv1.MachineDeploymentList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, md := range list.Items {
		out[md.Name] = ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	}
	sets := &clusterv1.MachineSetList{}
	if err := c.List(context.Background(), sets, client.InNamespace(ns), client.HasLabels{nodepoolv1.LabelPool}); err != nil {
		b.Fatal(err)
	}
	for _, ms := range sets.Items {
		if _, md := ms.Labels[clusterv1.MachineDeploymentNameLabel]; !md {
			out[ms.Name] = ptr.Deref(ms.Spec.Template.Spec.Bootstrap.DataSecretName, "") // an InPlace pool's
		}
	}
	return out
}

// reconcileCount reads controller-runtime's reconcile counter of the
// nodepool controller.
func reconcileCount(b *testing.B) float64 {
	b.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "nodepool" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// waitReconciles waits until the controller, from the count base, has
// reconciled at least n pools and gone quiet, and returns how many.
func waitReconciles(b *testing.B, n int, base float64) int {
	b.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	last, quiet := -1.0, 0
	for time.Now().Before(deadline) {
		got := reconcileCount(b) - base
		if got >= float64(n) && got == last {
			quiet++
			if quiet >= 2 {
				return int(got)
			}
		} else {
			quiet = 0
		}
		last = got
		time.Sleep(250 * time.Millisecond)
	}
	b.Fatalf("the controller did not reconcile %d pools", n)
	return 0
}
