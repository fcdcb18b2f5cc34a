package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// Environment of BenchmarkWavedPlatformRollout.
const (
	// WavedPoolsEnv lists the fleet sizes, comma-separated (default 300):
	// each is its own fleet, control plane and sub-benchmark (pools=N).
	WavedPoolsEnv = "NODEPOOL_BENCH_FLEETROLLOUT_POOLS"
	// WavedReplicasEnv is the machines per pool (default PoolMachinesEnv's,
	// 2): 0 measures the fleet rollout's own overhead, with no machine to
	// replace.
	WavedReplicasEnv = "NODEPOOL_BENCH_FLEETROLLOUT_REPLICAS"
	// WavedMaxConcurrentEnv lists the FleetRollout's spec.maxConcurrent
	// to measure, comma-separated (default 0: no cap): each is its own
	// fleet and sub-benchmark of each size (pools=N/max=M).
	WavedMaxConcurrentEnv = "NODEPOOL_BENCH_FLEETROLLOUT_MAX_CONCURRENT"
)

// BenchmarkWavedPlatformRollout runs `nodepool controller` in its own
// process over a fleet of pools in the shape of ShapesEnv (its first;
// default Clusters of 1 to 8 pools) and one FleetRollout (action Restart,
// waves 1, 10%, 100%, no soak) over all of them, for each size of
// WavedPoolsEnv. It reports the time from the FleetRollout's creation to
// its first wave starting (the selection of every pool recorded, the
// first pool annotated) and to complete, against the sum and the longest
// of the pools' own rollouts (from their history records: started to
// completed), and per pool the controller's CPU, its API writes, the
// FleetRollout reconciles and history lists during the rollout. Run it
// once: -benchtime 1x.
func BenchmarkWavedPlatformRollout(b *testing.B) {
	sizes := envInts(b, WavedPoolsEnv, 300, 1)
	caps := envInts(b, WavedMaxConcurrentEnv, 0, 0)
	replicas := envInt(b, WavedReplicasEnv, int(poolMachines(b)))
	dir := b.TempDir()
	bin := buildNodepool(b, dir)
	for _, n := range sizes {
		for _, m := range caps {
			name := fmt.Sprintf("pools=%d", n)
			if m > 0 {
				name += fmt.Sprintf("/max=%d", m)
			}
			b.Run(name, func(b *testing.B) { wavedRollout(b, bin, dir, n, int32(replicas), int32(m)) })
		}
	}
}

// envInts reads name as comma-separated numbers of at least least (def
// when unset).
func envInts(b *testing.B, name string, def, least int) []int {
	v := os.Getenv(name)
	if v == "" {
		return []int{def}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			b.Fatalf("%s=%q: want numbers of at least %d, comma-separated", name, v, least)
		}
		out = append(out, n)
	}
	return out
}

func wavedRollout(b *testing.B, bin, dir string, n int, replicas, maxConcurrent int32) {
	f, _ := startFleetEnv(b, bin, dir, false)
	defer func() { _ = f.env.Stop() }() // the next size is measured alone
	ctx := context.Background()
	c := f.c
	l := layoutFleet(b, shapes(b)[0], n, nil)
	l.create(b, c)
	p := f.start(b)
	defer p.stop()

	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				pool := clusterPool(l.ns[i], l.cluster[i], fmt.Sprintf("pool-%05d", i), replicas, false)
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
	t00 := time.Now()
	waitAll(b, c, "", n, "every pool settled", settled)
	b.Logf("%d pools of %d machines (%s) settled in %.1f s (load %s)", n, replicas, l.describe(), time.Since(t00).Seconds(), loadAverage())
	quiet(b, p)
	// What the quiet controller spends anyway (its Clusters' health
	// probes, its caches' upkeep, the garbage collector) grows with the
	// fleet and with time, not with the rollout: measured for 30 s, it is
	// taken off the rollout's CPU for the net figure.
	idle0, idleStart := p.sum(b, "process_cpu_seconds_total", nil), time.Now()
	time.Sleep(30 * time.Second)
	idleRate := (p.sum(b, "process_cpu_seconds_total", nil) - idle0) / time.Since(idleStart).Seconds()

	cpu0, writes0 := p.sum(b, "process_cpu_seconds_total", nil), p.writes(b)
	fleetReconciles := func() float64 {
		return p.sum(b, "controller_runtime_reconcile_total", func(l map[string]string) bool { return l["controller"] == "fleetrollout" })
	}
	reconciles0, lists0 := fleetReconciles(), p.sum(b, "nodepool_fleetrollout_history_lists_total", nil)
	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "bench"}},
			Action:       nodepoolv1.FleetActionRestart,
			Waves:        []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("10%"), intstr.FromString("100%")},
		},
	}
	if maxConcurrent > 0 {
		fr.Spec.MaxConcurrent = &maxConcurrent
	}
	b.ResetTimer()
	t0 := time.Now()
	// The controller's CPU profile of the rollout's first 60 s (with
	// ProfileEnv and NODEPOOL_BENCH_PPROF).
	profiled := profile(b, fmt.Sprintf("fleetrollout-%d", n), 60)
	defer profiled()
	must(b, c.Create(ctx, fr))
	var firstWave time.Duration
	deadline := time.Now().Add(120 * time.Minute)
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
		time.Sleep(time.Duration(200+n/10) * time.Millisecond)
	}
	total := time.Since(t0)
	b.StopTimer()
	cpu := p.sum(b, "process_cpu_seconds_total", nil) - cpu0
	writes := p.writes(b) - writes0
	reconciles := fleetReconciles() - reconciles0
	lists := p.sum(b, "nodepool_fleetrollout_history_lists_total", nil) - lists0
	sum, longest, rolled := poolRollouts(b, c, fr.Name)
	switch {
	case replicas > 0 && rolled != n:
		b.Errorf("%d pools have a completed rollout of the fleet rollout on record, want %d", rolled, n)
	case replicas == 0 && rolled != 0:
		// A restart replaces the machines made before it: a pool of none
		// has nothing to replace, so no rollout of its own.
		b.Errorf("%d pools of no machines have a rollout of the fleet rollout on record, want none", rolled)
	}
	b.ReportMetric(firstWave.Seconds(), "s-to-first-wave")
	b.ReportMetric(total.Seconds(), "s-to-complete")
	b.ReportMetric(sum.Seconds(), "s-pool-rollouts-sum")
	b.ReportMetric(longest.Seconds(), "s-pool-rollout-longest")
	b.ReportMetric(total.Seconds()/sum.Seconds(), "complete/sum")
	net := max(cpu-idleRate*total.Seconds(), 0)
	b.ReportMetric(cpu*1000/float64(n), "controller-cpu-ms/pool")
	b.ReportMetric(net*1000/float64(n), "controller-net-cpu-ms/pool")
	b.ReportMetric(idleRate, "controller-idle-cpu-s/s")
	b.ReportMetric(writes/float64(n), "api-writes/pool")
	b.ReportMetric(reconciles, "fleetrollout-reconciles")
	b.ReportMetric(reconciles/float64(n), "fleetrollout-reconciles/pool")
	b.ReportMetric(lists/float64(n), "history-lists/pool")
	b.Logf("fleet rollout over %d pools (%d machines each, %s, maxConcurrent %d): first wave after %.2f s, complete after %.1f s; "+
		"the pools' own rollouts %.1f s in sum (%.1f s the longest, complete/sum %.3f); controller CPU %.2f s (%.2f ms per pool; "+
		"%.2f ms per pool net of the %.3f s/s it spends quiet), "+
		"%.0f API writes (%.1f per pool), %.0f fleetrollout reconciles (%.2f per pool), %.0f history lists (%.2f per pool); load %s",
		n, replicas, l.describe(), maxConcurrent, firstWave.Seconds(), total.Seconds(), sum.Seconds(), longest.Seconds(), total.Seconds()/sum.Seconds(),
		cpu, cpu*1000/float64(n), net*1000/float64(n), idleRate, writes, writes/float64(n), reconciles, reconciles/float64(n), lists, lists/float64(n), loadAverage())
}

// poolRollouts sums the pools' rollouts the fleet rollout name requested
// (their history records of its initiator: started to completed), with the
// longest and how many pools have one completed.
func poolRollouts(b *testing.B, c client.Client, name string) (sum, longest time.Duration, pools int) {
	b.Helper()
	list := &appsv1.ControllerRevisionList{}
	must(b, c.List(context.Background(), list, client.HasLabels{nodepoolv1.LabelPool}))
	for i := range list.Items {
		e, err := history.Decode(&list.Items[i])
		if err != nil || e.Initiator != nodepoolv1.FleetRolloutInitiator(name) || e.Outcome != history.OutcomeComplete || e.Completed == nil {
			continue
		}
		d := e.Completed.Sub(e.Started)
		sum, longest, pools = sum+d, max(longest, d), pools+1
	}
	return sum, longest, pools
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
