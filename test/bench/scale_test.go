package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
)

// MachinesEnv overrides how many machines the scale run makes (default 500).
const MachinesEnv = "NODEPOOL_BENCH_MACHINES"

// BenchmarkSimScale runs one MachineDeployment of 500 simulated machines
// from 0 to all Running (a Node per Machine, each booted from the payload it
// fetched from the payload server) on the test control plane, and reports
// the time it took and the requests the API server handled meanwhile (the
// benchmark's own polling excluded). Run it once: -benchtime 1x.
func BenchmarkSimScale(b *testing.B) {
	n := 500
	if v := os.Getenv(MachinesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("%s=%q is not a positive number", MachinesEnv, v)
		}
	}
	ctx := context.Background()
	env, err := harness.Start(ctx, harness.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Log(err)
		}
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: sim.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.SetupWithManager(env.Context(), mgr, sim.Options{}); err != nil {
		b.Fatal(err)
	}
	env.Run(mgr)
	ps, err := simtest.StartPayloadServer(env.Context(), env.Config, b.TempDir(), ctrl.Log.WithName("payload-server"))
	if err != nil {
		b.Fatal(err)
	}

	// The poller counts its own requests, to leave them out of the figure.
	var own atomic.Int64
	pollCfg := rest.CopyConfig(env.Config)
	pollCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &own} })
	poller, err := client.New(pollCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	metrics, err := kubernetes.NewForConfig(pollCfg)
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := env.NewNamespace(b)
		if _, err := simtest.CreateCluster(ctx, poller, ns, "c1"); err != nil {
			b.Fatal(err)
		}
		if err := simtest.CreateMachineTemplate(ctx, poller, ns, "workers", simv1.SimMachineSpec{}); err != nil {
			b.Fatal(err)
		}
		boot, err := ps.CreateBoot(ctx, poller, ns, "c1", "workers", "scale")
		if err != nil {
			b.Fatal(err)
		}
		waitFor(b, time.Minute, func() bool {
			return poller.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret.Name("c1", secret.Kubeconfig)}, &corev1.Secret{}) == nil
		})
		before, err := apiserverRequests(ctx, metrics)
		if err != nil {
			b.Fatal(err)
		}
		ownBefore := own.Load()
		b.StartTimer()

		start := time.Now()
		if err := poller.Create(ctx, simtest.MachineDeployment(ns, "c1", "workers", "workers", boot.UserData, int32(n))); err != nil {
			b.Fatal(err)
		}
		last := -1
		waitFor(b, 30*time.Minute, func() bool {
			list := &clusterv1.MachineList{}
			if err := poller.List(ctx, list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			running, provisioned := 0, 0
			for _, m := range list.Items {
				if m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() {
					running++
				}
				if m.Spec.ProviderID != "" {
					provisioned++
				}
			}
			if running/50 != last/50 || os.Getenv("NODEPOOL_BENCH_VERBOSE") != "" {
				b.Logf("%s: %d Machines, %d with a providerID, %d/%d Running", time.Since(start).Round(time.Second), len(list.Items), provisioned, running, n)
				last = running
			}
			return running == n
		})
		elapsed := time.Since(start)
		b.StopTimer()

		after, err := apiserverRequests(ctx, metrics)
		if err != nil {
			b.Fatal(err)
		}
		total := after.total - before.total - float64(own.Load()-ownBefore)
		b.ReportMetric(elapsed.Seconds(), "s-to-running")
		b.ReportMetric(total, "apiserver-requests")
		b.ReportMetric(total/float64(n), "requests/machine")
		fmt.Printf("sim scale run: %d machines Running in %s; the API server handled %.0f requests (%.1f per machine; most: %s)\n",
			n, elapsed.Round(100*time.Millisecond), total, total/float64(n), after.minus(before))
	}
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func waitFor(b *testing.B, timeout time.Duration, done func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s", timeout)
		}
		time.Sleep(time.Second)
	}
}

// requestCounts is apiserver_request_total, in all and by verb and
// resource ("PATCH machines/status").
type requestCounts struct {
	total float64
	by    map[string]float64
}

// minus lists the differences of a and b by verb and resource, largest
// first, the ten largest only.
func (a requestCounts) minus(b requestCounts) string {
	type row struct {
		key string
		n   float64
	}
	var rows []row
	for k, v := range a.by {
		if d := v - b.by[k]; d >= 1 {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].n > rows[j].n || rows[i].n == rows[j].n && rows[i].key < rows[j].key
	})
	parts := make([]string, 0, 10)
	for i, r := range rows {
		if i == 10 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", r.key, r.n))
	}
	return strings.Join(parts, ", ")
}

// apiserverRequests reads apiserver_request_total from the API server's
// /metrics.
func apiserverRequests(ctx context.Context, cs kubernetes.Interface) (requestCounts, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return requestCounts{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return requestCounts{}, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := requestCounts{by: map[string]float64{}}
	f, ok := families["apiserver_request_total"]
	if !ok {
		return requestCounts{}, fmt.Errorf("the API server's /metrics has no apiserver_request_total")
	}
	for _, m := range f.GetMetric() {
		v := m.GetCounter().GetValue()
		out.total += v
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out.by[key] += v
	}
	return out, nil
}
