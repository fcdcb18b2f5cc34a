package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// Environment of BenchmarkWavedPlatformRollout.
const (
	// WavedPoolsEnv is the number of pools (default 1000).
	WavedPoolsEnv = "NODEPOOL_BENCH_FLEETROLLOUT_POOLS"
	// WavedReplicasEnv is the machines per pool, 0 or 1 (default 0: the
	// fleet rollout's own overhead, with no machine to replace).
	WavedReplicasEnv = "NODEPOOL_BENCH_FLEETROLLOUT_REPLICAS"
)

// BenchmarkWavedPlatformRollout runs `nodepool controller` in its own
// process over a fleet of pools and one FleetRollout (action Restart,
// waves 1, 10%, 100%, no soak) over all of them. It reports the time from
// the FleetRollout's creation to its first wave starting (the selection of
// every pool recorded, the first pool annotated), the time to complete,
// and the controller's CPU and API writes per pool during the rollout.
// Run it once: -benchtime 1x.
func BenchmarkWavedPlatformRollout(b *testing.B) {
	n, replicas := envInt(b, WavedPoolsEnv, 1000), envInt(b, WavedReplicasEnv, 0)
	dir := b.TempDir()
	bin := buildNodepool(b, dir)
	f, _ := startFleetEnv(b, bin, dir, false)
	ctx := context.Background()
	c := f.c
	const ns = "fleet"
	poolNamespace(b, c, ns)
	p := f.start(b)
	defer p.stop()

	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				pool := fleetPool(ns, fmt.Sprintf("pool-%05d", i), int32(replicas), false)
				pool.Labels = map[string]string{"tier": "bench"}
				must(b, c.Create(ctx, pool))
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	waitAll(b, c, ns, n, "every pool settled", func(p *nodepoolv1.NodePool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionReady) && p.Status.ObservedGeneration == p.Generation &&
			p.Status.ReadyReplicas == int32(replicas)
	})
	quiet(b, p)

	cpu0, writes0 := p.sum(b, "process_cpu_seconds_total", nil), p.writes(b)
	fleetReconciles := func() float64 {
		return p.sum(b, "controller_runtime_reconcile_total", func(l map[string]string) bool { return l["controller"] == "fleetrollout" })
	}
	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "bench"}},
			Action:       nodepoolv1.FleetActionRestart,
			Waves:        []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("10%"), intstr.FromString("100%")},
		},
	}
	b.ResetTimer()
	t0 := time.Now()
	must(b, c.Create(ctx, fr))
	var firstWave time.Duration
	deadline := time.Now().Add(60 * time.Minute)
	for {
		got := &nodepoolv1.FleetRollout{}
		must(b, c.Get(ctx, client.ObjectKeyFromObject(fr), got))
		if firstWave == 0 && len(got.Status.Waves) > 0 && got.Status.Waves[0].StartedAt != nil {
			firstWave = time.Since(t0)
		}
		if got.Status.Phase == nodepoolv1.FleetPhaseComplete {
			if sel := stack.FleetSelected(got); sel != n || len(stack.FleetPools(b, c, got)) != n {
				b.Fatalf("selected %d pools, want %d", sel, n)
			}
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the fleet rollout did not complete: %s (%s)", got.Status.Phase, got.Status.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	total := time.Since(t0)
	b.StopTimer()
	cpu := p.sum(b, "process_cpu_seconds_total", nil) - cpu0
	writes := p.writes(b) - writes0
	b.ReportMetric(firstWave.Seconds(), "s-to-first-wave")
	b.ReportMetric(total.Seconds(), "s-to-complete")
	b.ReportMetric(cpu*1000/float64(n), "controller-cpu-ms/pool")
	b.ReportMetric(writes/float64(n), "api-writes/pool")
	lists := p.sum(b, "nodepool_fleetrollout_history_lists_total", nil)
	b.ReportMetric(fleetReconciles(), "fleetrollout-reconciles")
	b.ReportMetric(fleetReconciles()/float64(n), "fleetrollout-reconciles/pool")
	b.ReportMetric(lists/float64(n), "history-lists/pool")
	b.Logf("fleet rollout over %d pools (%d machines each): first wave after %.2f s, complete after %.1f s; controller CPU %.2f s (%.2f ms per pool), %.0f API writes (%.1f per pool), %.0f fleetrollout reconciles (%.2f per pool), %.0f history lists (%.2f per pool); load %s",
		n, replicas, firstWave.Seconds(), total.Seconds(), cpu, cpu*1000/float64(n), writes, writes/float64(n), fleetReconciles(), fleetReconciles()/float64(n), lists, lists/float64(n), loadAverage())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a number", name, v)
	}
	return n
}
