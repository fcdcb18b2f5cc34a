package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
)

// Environment of BenchmarkFleet.
const (
	// PoolsEnv lists the fleet sizes, comma-separated (default 1000).
	PoolsEnv = "NODEPOOL_BENCH_POOLS"
	// OutEnv is the folder of the summary (default bin/bench).
	OutEnv = "NODEPOOL_BENCH_OUT"
	// PerNamespaceEnv is how many pools share a namespace at most
	// (default 1000): a fleet of 10,000 is ten namespaces or more, each
	// with its Clusters (ShapesEnv: many of 1 to 8 pools, or one).
	PerNamespaceEnv = "NODEPOOL_BENCH_POOLS_PER_NAMESPACE"
	// AttachEnv is the folder of a fleet an earlier run left settled (its
	// kubeconfig and controller-args, with its control plane still up):
	// the run measures that fleet's resync, memory, edits and bump, and
	// settles nothing. For a fleet whose settle takes longer than a run
	// can wait (10,000 pools on 2 cores), or whose benchmark was stopped.
	// The run must have the first run's shape (ShapesEnv, its first) and
	// PerNamespaceEnv, which place the pools it edits; its pools' Nodes are
	// readable only if the first run had SharedNodesEnv (the Clusters'
	// views of the API server end with the first run's process).
	AttachEnv = "NODEPOOL_BENCH_ATTACH"
	// SharedNodesEnv ("1") points every Cluster's kubeconfig at the test
	// API server itself, where each Cluster sees every Cluster's Nodes (the
	// benchmark before 2026-12-05 13:00 UTC). By default each Cluster
	// reaches the sim's view of it, its own Nodes only, as in a real fleet.
	SharedNodesEnv = "NODEPOOL_BENCH_SHARED_NODES"
)

// fleetResult is one fleet size's figures (the JSON summary's rows).
type fleetResult struct {
	Pools int `json:"pools"`
	// Shape is the fleet's shape (ShapesEnv), with its Clusters and
	// namespaces; MachinesPerPool each pool's machines.
	Shape                 string  `json:"shape"`
	Clusters              int     `json:"clusters"`
	Namespaces            int     `json:"namespaces"`
	MachinesPerPool       int32   `json:"machinesPerPool"`
	SettleSeconds         float64 `json:"settleSeconds"`
	SettleCPUSeconds      float64 `json:"settleCPUSeconds"`
	ResyncSeconds         float64 `json:"resyncSeconds"`
	ResyncWrites          float64 `json:"resyncWrites"`
	ResyncRenders         float64 `json:"resyncRenders"`
	ResyncComposes        float64 `json:"resyncComposes"`
	ResyncCPUSeconds      float64 `json:"resyncCPUSeconds"`
	ResyncAPIServerCPU    float64 `json:"resyncAPIServerCPUSeconds"`
	ResyncStartSeconds    float64 `json:"resyncStartSeconds"`
	ResyncStartCPUSeconds float64 `json:"resyncStartCPUSeconds"`
	BumpCPUSeconds        float64 `json:"bumpCPUSeconds"`
	BumpSeconds           float64 `json:"bumpSeconds"`
	BumpRenders           float64 `json:"bumpRenders"`
	BumpComposes          float64 `json:"bumpComposes"`
	BumpWrites            float64 `json:"bumpWrites"`
	BumpWritesQuiet       float64 `json:"bumpWritesQuiet"`
	BumpEvents            int     `json:"bumpEvents"`
	BumpAPIServerCPU      float64 `json:"bumpAPIServerCPUSeconds"`
	BumpEtcdCPU           float64 `json:"bumpEtcdCPUSeconds"`
	PoolsRolled           int     `json:"poolsRolled"`
	// Shards is how many controller processes ran the fleet (ShardsEnv);
	// SettledByShards, when set, is the count it settled under (this
	// count was measured on the settled fleet).
	Shards          int `json:"shards"`
	SettledByShards int `json:"settledByShards,omitempty"`
	// The largest shard's resident memory and heap in use.
	LargestShardRSSBytes  float64 `json:"largestShardRSSBytes"`
	LargestShardHeapBytes float64 `json:"largestShardHeapInuseBytes"`
	RSSBytesPerPool       float64 `json:"rssBytesPerPool"`
	HeapBytesPerPool      float64 `json:"heapBytesPerPool"`
	RSSBytes              float64 `json:"rssBytes"`
	HeapInuseBytes        float64 `json:"heapInuseBytes"`
	EditToPatchP50Seconds float64 `json:"editToPatchP50Seconds"`
	EditToPatchP99Seconds float64 `json:"editToPatchP99Seconds"`
	LoadAverage           string  `json:"loadAverage"`

	// SettleWrites are every client's writes from the first pool created
	// to the last one settled, by client and resource (writes_test.go).
	SettleWrites     []kindWrites `json:"settleWrites,omitempty"`
	SettleLoad       string       `json:"settleLoadAverage"`
	SettleReconciles float64      `json:"settleReconciles"`
	// The most writes a second, over 10 s, of the controller and of
	// Cluster API during the settle.
	SettlePeakControllerWritesPerSec float64 `json:"settlePeakControllerWritesPerSecond"`
	SettlePeakCAPIWritesPerSec       float64 `json:"settlePeakCAPIWritesPerSecond"`
	// Cluster API updates the controller ignored and let through.
	SettleCAPIUpdatesIgnored float64 `json:"settleCAPIUpdatesIgnored"`
	SettleCAPIUpdatesWoke    float64 `json:"settleCAPIUpdatesWoke"`
	// CPU seconds of the other processes in the settle: kube-apiserver,
	// etcd, and this one (Cluster API, the sim, the payload server).
	SettleAPIServerCPU float64 `json:"settleAPIServerCPUSeconds"`
	SettleEtcdCPU      float64 `json:"settleEtcdCPUSeconds"`
	SettleInProcessCPU float64 `json:"settleInProcessCPUSeconds"`
	// The quiet phase: the settled fleet, QuietAfterEnv after the settle.
	QuietReconcilesPerSecond      float64      `json:"quietReconcilesPerSecond"`
	QuietControllerRequestsPerMin float64      `json:"quietControllerRequestsPerMin"`
	QuietWritesPerMin             float64      `json:"quietWritesPerMin"`
	QuietControllerWritesPerMin   float64      `json:"quietControllerWritesPerMin"`
	QuietCAPIWritesPerMin         float64      `json:"quietCAPIWritesPerMin"`
	QuietWrites                   []kindWrites `json:"quietWrites,omitempty"`
	QuietCAPIUpdatesIgnored       float64      `json:"quietCAPIUpdatesIgnored"`
	QuietCAPIUpdatesWoke          float64      `json:"quietCAPIUpdatesWoke"`
	QuietLoadAverage              string       `json:"quietLoadAverage"`
}

// BenchmarkFleet runs `nodepool controller` in its own process over fleets
// of pools of PoolMachinesEnv machines each (default 2; every other pool
// InPlace) on the test control plane, for each size of
// NODEPOOL_BENCH_POOLS in each shape of ShapesEnv (default: Clusters of 1
// to 8 pools), then a 3-machine rollout through nodepool next to the same
// rollout of a bare MachineDeployment.
// It prints one table and writes summary.json to NODEPOOL_BENCH_OUT. Run
// it once: -benchtime 1x.
func BenchmarkFleet(b *testing.B) {
	sizes := []int{1000}
	if v := os.Getenv(PoolsEnv); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want positive numbers, comma-separated", PoolsEnv, v)
			}
			sizes = append(sizes, n)
		}
	}
	out := os.Getenv(OutEnv)
	if out == "" {
		out = filepath.Join("..", "..", "bin", "bench")
	}
	dir := b.TempDir()
	bin := buildNodepool(b, dir)
	var results []fleetResult
	ratio := map[string]float64{}
	counts := shardCounts(b)
	if from := os.Getenv(AttachEnv); from != "" {
		results = append(results, attachFleet(b, bin, from, counts)...)
	} else {
		for _, shape := range shapes(b) {
			for _, n := range sizes {
				results = append(results, runFleet(b, bin, dir, n, counts, shape)...)
			}
		}
		if os.Getenv(SettleOnlyEnv) == "" {
			ratio = runRolloutComparison(b, bin, dir)
		}
	}

	host, _ := os.Hostname()
	summary := map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "host": host, "cpus": runtime.NumCPU(),
		"fleets": results, "rollout": ratio}
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	j, _ := json.MarshalIndent(summary, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "summary.json"), j, 0o644); err != nil {
		b.Fatal(err)
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\nfleet benchmark, %s, %d CPUs\n", summary["date"], runtime.NumCPU())
	fmt.Fprintf(&t, "| %-44s |", "pools")
	for _, r := range results {
		fmt.Fprintf(&t, " %10d |", r.Pools)
	}
	row := func(name string, f func(fleetResult) string) {
		fmt.Fprintf(&t, "\n| %-44s |", name)
		for _, r := range results {
			fmt.Fprintf(&t, " %10s |", f(r))
		}
	}
	secs := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " s" }
	settle := func(r fleetResult, v float64) string {
		switch {
		case r.SettledByShards > 0:
			return fmt.Sprintf("by %d", r.SettledByShards) // measured on the fleet settled under that count
		case v == 0:
			return "attached" // an earlier run's fleet (AttachEnv)
		}
		return secs(v)
	}
	row("shape", func(r fleetResult) string { return r.Shape })
	row("  Clusters / namespaces / machines a pool", func(r fleetResult) string {
		return fmt.Sprintf("%d/%d/%d", r.Clusters, r.Namespaces, r.MachinesPerPool)
	})
	row("controller processes (shards)", func(r fleetResult) string { return strconv.Itoa(r.Shards) })
	row("settle (create every pool to Ready, Settled)", func(r fleetResult) string { return settle(r, r.SettleSeconds) })
	row("  controller CPU in it", func(r fleetResult) string { return settle(r, r.SettleCPUSeconds) })
	row("  kube-apiserver / etcd / Cluster API+sim CPU", func(r fleetResult) string {
		if r.SettleSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f/%.0f/%.0f s", r.SettleAPIServerCPU, r.SettleEtcdCPU, r.SettleInProcessCPU)
	})
	row("  writes per pool: controller / Cluster API", func(r fleetResult) string {
		if r.SettleSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f/%.1f", float64(agentWrites(r.SettleWrites, agentController))/float64(r.Pools),
			float64(agentWrites(r.SettleWrites, agentCAPI))/float64(r.Pools))
	})
	row("  peak writes/s (10 s): controller / Cluster API", func(r fleetResult) string {
		if r.SettleSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f/%.1f", r.SettlePeakControllerWritesPerSec, r.SettlePeakCAPIWritesPerSec)
	})
	row("  reconciles per pool / load average", func(r fleetResult) string {
		if r.SettleSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f/%s", r.SettleReconciles/float64(r.Pools), r.SettleLoad)
	})
	row("  Cluster API updates ignored / woke a pool", func(r fleetResult) string {
		if r.SettleSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f/%.0f", r.SettleCAPIUpdatesIgnored, r.SettleCAPIUpdatesWoke)
	})
	row("quiet (settled): reconciles/s", func(r fleetResult) string { return fmt.Sprintf("%.2f", r.QuietReconcilesPerSecond) })
	row("  Cluster API updates ignored / woke a pool", func(r fleetResult) string {
		return fmt.Sprintf("%.0f/%.0f", r.QuietCAPIUpdatesIgnored, r.QuietCAPIUpdatesWoke)
	})
	row("  writes/min: controller / Cluster API / all", func(r fleetResult) string {
		return fmt.Sprintf("%.1f/%.1f/%.1f", r.QuietControllerWritesPerMin, r.QuietCAPIWritesPerMin, r.QuietWritesPerMin)
	})
	row("  load average then", func(r fleetResult) string { return r.QuietLoadAverage })
	row("full no-op resync (restart)", func(r fleetResult) string { return secs(r.ResyncSeconds) })
	row("  API writes / renders / composes in it", func(r fleetResult) string {
		return fmt.Sprintf("%.0f/%.0f/%.0f", r.ResyncWrites, r.ResyncRenders, r.ResyncComposes)
	})
	row("  controller CPU in it (start included)", func(r fleetResult) string { return secs(r.ResyncCPUSeconds) })
	row("  start to first reconcile / controller CPU", func(r fleetResult) string {
		return fmt.Sprintf("%.2f/%.2f s", r.ResyncStartSeconds, r.ResyncStartCPUSeconds)
	})
	row("  kube-apiserver CPU in it", func(r fleetResult) string { return secs(r.ResyncAPIServerCPU) })
	row("management bump visible on every pool", func(r fleetResult) string { return secs(r.BumpSeconds) })
	row("  controller CPU in it", func(r fleetResult) string { return secs(r.BumpCPUSeconds) })
	row("  kube-apiserver / etcd CPU in it", func(r fleetResult) string {
		return fmt.Sprintf("%.1f/%.1f s", r.BumpAPIServerCPU, r.BumpEtcdCPU)
	})
	row("  pools rolled / renders / composes / writes", func(r fleetResult) string {
		return fmt.Sprintf("%d/%.0f/%.0f/%.0f", r.PoolsRolled, r.BumpRenders, r.BumpComposes, r.BumpWrites)
	})
	row("  writes once quiet / drift events", func(r fleetResult) string {
		return fmt.Sprintf("%.0f/%d", r.BumpWritesQuiet, r.BumpEvents)
	})
	row("controller RSS per pool (total)", func(r fleetResult) string {
		return fmt.Sprintf("%.1f KiB", r.RSSBytesPerPool/1024)
	})
	row("controller heap in use per pool", func(r fleetResult) string { return fmt.Sprintf("%.1f KiB", r.HeapBytesPerPool/1024) })
	row("controller RSS / heap in use, total", func(r fleetResult) string {
		return fmt.Sprintf("%.0f/%.0f MiB", r.RSSBytes/(1<<20), r.HeapInuseBytes/(1<<20))
	})
	row("  of the largest shard", func(r fleetResult) string {
		return fmt.Sprintf("%.0f/%.0f MiB", r.LargestShardRSSBytes/(1<<20), r.LargestShardHeapBytes/(1<<20))
	})
	row("edit -> MachineDeployment patch p50, resync", func(r fleetResult) string { return secs(r.EditToPatchP50Seconds) })
	row("edit -> MachineDeployment patch p99, resync", func(r fleetResult) string { return secs(r.EditToPatchP99Seconds) })
	row("load average (1 min, at the end)", func(r fleetResult) string { return r.LoadAverage })
	if len(ratio) > 0 {
		fmt.Fprintf(&t, "\n3-machine rollout: nodepool %.1f s, bare MachineDeployment %.1f s, ratio %.3f\n",
			ratio["nodepoolSeconds"], ratio["bareSeconds"], ratio["ratio"])
	}
	for _, r := range results {
		of := fmt.Sprintf(" (%d pools, %s, %d shards)", r.Pools, r.Shape, r.Shards)
		if len(r.SettleWrites) > 0 {
			t.WriteString(formatWrites("writes to settle, by client and resource"+of, r.SettleWrites, r.Pools))
		}
		if len(r.QuietWrites) > 0 {
			t.WriteString(formatWrites("writes in the quiet phase"+of, r.QuietWrites, r.Pools))
		}
	}
	b.Log(t.String())
	fmt.Println(t.String())
}

// fleet is a running control plane with a controller process.
type fleet struct {
	env        *harness.Env
	c          client.Client
	bin, dir   string
	kubeconfig string
	args       []string
	// audit is the API server's audit log of writes.
	audit string
	// shards are the flags of each controller process f.start starts
	// (shardArgs); nil is one unsharded controller.
	shards [][]string
}

// start starts the fleet's controller: one process per shard. The first
// profiles on NODEPOOL_BENCH_PPROF, the others on free ports.
func (f *fleet) start(b *testing.B) controllers {
	shards := f.shards
	if len(shards) == 0 {
		shards = [][]string{nil}
	}
	var cs controllers
	for i, extra := range shards {
		args := append(append([]string{}, f.args...), extra...)
		log := "controller.log"
		if len(shards) > 1 {
			log = fmt.Sprintf("controller-shard-%d.log", i)
			if i > 0 {
				args = append(args, "--pprof-bind-address", freePort(b))
			}
		}
		cs = append(cs, startController(b, f.bin, f.kubeconfig, filepath.Join(f.dir, log), args...))
	}
	return cs
}

// emptyFootprint is the resident memory and heap in use of one controller
// owning a namespace with no pool: what a process costs before its pools.
func (f *fleet) emptyFootprint(b *testing.B) (rss, heap float64) {
	empty := startController(b, f.bin, f.kubeconfig, filepath.Join(f.dir, "controller-empty.log"),
		append(append([]string{}, f.args...), "--shard", "bench-empty", "--namespaces", "bench-empty")...)
	defer empty.stop()
	time.Sleep(3 * time.Second)
	empty.collectGarbage(b)
	return empty.rss(b), empty.heapInuse(b)
}

// resharded measures the settled fleet again as each further count of
// counts (the first settled it): the quiet phase, resync, memory, edits
// and bump.
func resharded(b *testing.B, f *fleet, pw *poolWatch, n int, l *fleetLayout, counts []int, settledBy int, machines int32) []fleetResult {
	if len(counts) == 0 {
		return nil
	}
	rss, heap := f.emptyFootprint(b)
	var out []fleetResult
	for _, k := range counts {
		f.shards = shardArgs(k, l.namespaces)
		b.Logf("%d pools as %d shards", n, k)
		res := fleetResult{Pools: n, Shards: k, SettledByShards: settledBy, Shape: l.shape, Clusters: l.clusterCount(), Namespaces: len(l.namespaces), MachinesPerPool: machines}
		out = append(out, measureSettled(b, f, pw, n, l.nsOf, res, float64(k)*rss, float64(k)*heap))
	}
	return out
}

func startFleetEnv(b *testing.B, bin, dir string, withPayloadServer bool) (*fleet, *simtest.PayloadServer) {
	b.Helper()
	ctx := context.Background()
	logs, err := os.MkdirTemp(dir, "audit-")
	must(b, err)
	audit := filepath.Join(logs, "audit.log")
	env, err := harness.Start(ctx, harness.Options{AuditLog: audit})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	skip := true
	simCfg := rest.CopyConfig(env.Config)
	simCfg.UserAgent = agentSim
	simMgr, err := ctrl.NewManager(simCfg, ctrl.Options{Scheme: env.Scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		b.Fatal(err)
	}
	// Each Cluster sees its own Nodes, as in a real fleet: the
	// controller's and Cluster API's caches of a Cluster hold its Nodes,
	// not the whole fleet's.
	views := "127.0.0.1:0"
	if os.Getenv(SharedNodesEnv) == "1" {
		views = ""
	}
	if err := sim.SetupWithManager(env.Context(), simMgr, sim.Options{ClusterViewsAddress: views}); err != nil {
		b.Fatal(err)
	}
	env.Run(simMgr)
	sub, err := os.MkdirTemp(dir, "fleet-")
	if err != nil {
		b.Fatal(err)
	}
	ps, err := simtest.StartPayloadServer(env.Context(), env.Config, sub, ctrl.Log.WithName("payload-server"))
	if err != nil {
		b.Fatal(err)
	}
	caFile := filepath.Join(sub, "payload-ca.pem")
	if err := os.WriteFile(caFile, ps.CA, 0o644); err != nil {
		b.Fatal(err)
	}
	c := env.Client
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inputs.DefaultManagementConfig.Namespace}}))
	must(b, c.Create(ctx, managementConfig(1)))
	f := &fleet{env: env, c: c, bin: bin, dir: sub, kubeconfig: writeKubeconfig(b, env.Config, sub), audit: audit,
		args: []string{"--payload-server-url", ps.URL, "--payload-server-ca", caFile, "--resync-period", "1h",
			"--cleanup-grace-period", "1h", "--zap-log-level", "error"}}
	f.args = append(f.args, strings.Fields(os.Getenv(ControllerArgsEnv))...)
	// What a later run needs to measure this fleet again (AttachEnv).
	must(b, os.WriteFile(filepath.Join(sub, "controller-args"), []byte(strings.Join(f.args, "\n")+"\n"), 0o644))
	return f, ps
}

func managementConfig(v int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: inputs.DefaultManagementConfig.Namespace, Name: inputs.DefaultManagementConfig.Name},
		Data: map[string]string{inputs.ManagementConfigKey: fmt.Sprintf("apiServerProxyImage: registry.example/haproxy@sha256:%064x\n", v)}}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func fleetPool(ns, name string, replicas int32, inPlace bool) *nodepoolv1.NodePool {
	return clusterPool(ns, "c1", name, replicas, inPlace)
}

// clusterPool is a pool of the Cluster cluster.
func clusterPool(ns, cluster, name string, replicas int32, inPlace bool) *nodepoolv1.NodePool {
	p := &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName: cluster, Replicas: ptr.To(replicas), Release: nodepoolv1.Release{Version: "v1.36.3"},
			Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
			InfrastructureTemplateRef: nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: "small"},
		},
	}
	if inPlace {
		p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
	}
	return p
}

// poolNamespace creates namespace ns with what its pools read: the Cluster
// c1, the template small and the user config chrony.
func poolNamespace(b *testing.B, c client.Client, ns string) {
	ctx := context.Background()
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	_, err := simtest.CreateCluster(ctx, c, ns, "c1")
	must(b, err)
	must(b, simtest.CreateMachineTemplate(ctx, c, ns, "small", simv1.SimMachineSpec{}))
	must(b, c.Create(ctx, chrony(ns, "ntp")))
}

func chrony(ns, server string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chrony"},
		Data: map[string]string{inputs.ConfigKey: "ignition: {version: 3.4.0}\nstorage: {files: [{path: /etc/chrony.conf, contents: {source: \"data:,server%20" + server + "\"}}]}\n"}}
}

// runFleet settles a fleet of n pools in shape under the first of counts
// shards and measures it, then measures it again as each further count.
func runFleet(b *testing.B, bin, dir string, n int, counts []int, shape string) []fleetResult {
	ctx := context.Background()
	f, _ := startFleetEnv(b, bin, dir, false)
	c := f.c
	l := layoutFleet(b, shape, n, counts)
	l.create(b, c)
	machines := poolMachines(b)
	b.Logf("%d pools of %d machines, %s", n, machines, l.describe())
	f.shards = shardArgs(counts[0], l.namespaces)
	res := fleetResult{Pools: n, Shards: counts[0], Shape: shape, Clusters: l.clusterCount(), Namespaces: len(l.namespaces), MachinesPerPool: machines}
	pw := watchPools(b, f.env.Config, f.env.Scheme)

	p := f.start(b)
	time.Sleep(3 * time.Second)
	p.collectGarbage(b)
	rssEmpty, heapEmpty := p.rss(b), p.heapInuse(b)
	t0, apiCPU0, etcdCPU0, selfCPU0 := time.Now(), childCPU("kube-apiserver"), childCPU("etcd"), selfCPU()
	// The API server's and this process's (Cluster API's) profiles of a
	// minute well into the settle, when every kind of object is being
	// written.
	var profiling sync.WaitGroup
	profiling.Add(1)
	settleProfile := time.AfterFunc(time.Duration(n/20)*time.Second, func() {
		defer profiling.Done()
		wait := apiServerProfile(b, f.env.Config, fmt.Sprintf("apiserver-settle-%d", n), 60)
		selfProfile(b, fmt.Sprintf("inprocess-settle-%d", n), 60)
		wait()
	})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				must(b, c.Create(ctx, clusterPool(l.ns[i], l.cluster[i], fmt.Sprintf("pool-%05d", i), machines, i%2 == 1)))
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	pw.waitAll(b, n, "every pool settled", settled)
	res.SettleSeconds = time.Since(t0).Seconds()
	if settleProfile.Stop() {
		profiling.Done() // never started
	}
	profiling.Wait()
	res.SettleCPUSeconds = p.sum(b, "process_cpu_seconds_total", nil)
	res.SettleAPIServerCPU, res.SettleEtcdCPU = childCPU("kube-apiserver")-apiCPU0, childCPU("etcd")-etcdCPU0
	res.SettleInProcessCPU = selfCPU() - selfCPU0
	res.SettleReconciles, res.SettleLoad = p.reconciles(b), loadAverage()
	res.SettleCAPIUpdatesIgnored, res.SettleCAPIUpdatesWoke = p.capiUpdates(b, "ignored"), p.capiUpdates(b, "woke")
	settledAt := time.Now()
	settleWrites := readAudit(b, f, t0, settledAt)
	res.SettleWrites = writesByKind(settleWrites)
	res.SettlePeakControllerWritesPerSec = peakWritesPerSecond(settleWrites, agentController)
	res.SettlePeakCAPIWritesPerSec = peakWritesPerSecond(settleWrites, agentCAPI)
	b.Logf("%d pools (%s) settled in %.1f s (load %s); CPU seconds: controller %.0f, kube-apiserver %.0f, etcd %.0f, Cluster API+sim %.0f, of %.0f on %d cores%s",
		n, l.describe(), res.SettleSeconds, res.SettleLoad, res.SettleCPUSeconds, res.SettleAPIServerCPU, res.SettleEtcdCPU, res.SettleInProcessCPU,
		res.SettleSeconds*float64(runtime.NumCPU()), runtime.NumCPU(), formatWrites("writes to settle", res.SettleWrites, n))
	measureQuiet(b, f, p, settledAt, &res) // writes_test.go
	if os.Getenv(SettleOnlyEnv) != "" {
		p.stop()
		res.LoadAverage = loadAverage()
		return []fleetResult{res}
	}
	quiet(b, p) // Cluster API's last status updates reconciled
	p.stop()
	out := []fleetResult{measureSettled(b, f, pw, n, l.nsOf, res, rssEmpty, heapEmpty)}
	out = append(out, resharded(b, f, pw, n, l, counts[1:], counts[0], machines)...)
	// This fleet's control plane, Cluster API and sim stop here, not at
	// the benchmark's end: the next fleet is measured alone.
	pw.stop()
	_ = f.env.Stop() // as its cleanup does
	return out
}

// attachFleet measures the settled fleet of folder from (AttachEnv): its
// pools are counted, its controller's empty figures are a controller
// owning only a namespace with no pool.
func attachFleet(b *testing.B, bin, from string, counts []int) []fleetResult {
	kubeconfig := filepath.Join(from, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	must(b, err)
	scheme, err := harness.NewScheme()
	must(b, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(b, err)
	raw, err := os.ReadFile(filepath.Join(from, "controller-args"))
	must(b, err)
	attached = true                // its control plane is not this process's child
	ctrl.SetLogger(logr.Discard()) // the informer's; the controller logs to its own file
	f := &fleet{env: &harness.Env{Config: cfg, Scheme: scheme, Client: c}, c: c, bin: bin, dir: from, kubeconfig: kubeconfig,
		args: strings.Fields(string(raw))}
	pw := watchPools(b, cfg, scheme)
	pw.mu.Lock()
	n := len(pw.pools)
	pw.mu.Unlock()
	l := layoutFleet(b, shapes(b)[0], n, counts)
	pw.waitAll(b, n, "every pool settled", settled)
	b.Logf("attached to %d settled pools (%s)", n, l.describe())
	return resharded(b, f, pw, n, l, counts, 0, poolMachines(b))
}

// settled: the pool runs its payload, is Ready, has seen its spec and
// says it is settled (status.rollout: nothing rolls, its first rollout
// recorded complete). Ready alone comes before Cluster API's status of the
// MachineDeployment catches up: at 10,000 pools that backlog lasts minutes
// after the last pool is Ready, and the pools it wakes then record their
// rollouts complete, which is the settle, not a quiet fleet's noise.
func settled(p *nodepoolv1.NodePool) bool {
	return p.Annotations[nodepoolv1.AnnotationCurrentPayload] != "" && meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionReady) &&
		p.Status.ObservedGeneration == p.Generation && p.Status.Rollout != nil && p.Status.Rollout.Settled &&
		p.Status.ReadyReplicas == ptr.Deref(p.Spec.Replicas, 0) // its machines booted and their nodes ready
}

// measureSettled takes the figures of a settled fleet of n pools: a full
// resync (a restart) with the memory after it, edits during a resync, and
// a management bump. rssEmpty and heapEmpty are the controller's with no
// pool.
func measureSettled(b *testing.B, f *fleet, pw *poolWatch, n int, nsOf func(int) string, res fleetResult, rssEmpty, heapEmpty float64) fleetResult {
	ctx, c := context.Background(), f.c
	const ns = "" // every namespace of the fleet
	targets := dataSecretNames(b, c, ns)
	tag := strconv.Itoa(n) // of the profiles' names
	if res.Shards > 1 {
		tag += fmt.Sprintf("-%dshards", res.Shards)
	}

	// A full resync of settled pools: a restart reconciles every pool.
	t1, apiCPU := time.Now(), childCPU("kube-apiserver")
	p := f.start(b)
	waitProfile := profile(b, "resync-"+tag, 15+n/500)
	// The start (process, manager, every cache listed and synced) ends
	// with the first reconcile: the workers start once the caches synced.
	waitReconciles(b, p, 1)
	res.ResyncStartSeconds, res.ResyncStartCPUSeconds = time.Since(t1).Seconds(), p.sum(b, "process_cpu_seconds_total", nil)
	waitReconciles(b, p, n)
	res.ResyncSeconds = time.Since(t1).Seconds()
	res.ResyncAPIServerCPU = childCPU("kube-apiserver") - apiCPU
	time.Sleep(2 * time.Second)
	res.ResyncWrites, res.ResyncRenders, res.ResyncComposes = p.writes(b), p.renders(b, "miss"), p.renders(b, "composed")
	res.ResyncCPUSeconds = p.sum(b, "process_cpu_seconds_total", nil)
	p.collectGarbage(b)
	res.RSSBytes, res.HeapInuseBytes = p.rss(b), p.heapInuse(b)
	res.LargestShardRSSBytes, res.LargestShardHeapBytes = p.largest(b)
	heapProfile(b, "heap-"+tag)
	res.RSSBytesPerPool = (res.RSSBytes - rssEmpty) / float64(n)
	res.HeapBytesPerPool = (res.HeapInuseBytes - heapEmpty) / float64(n)
	b.Logf("full resync %.2f s, %.0f writes, %.0f renders; RSS %.0f MiB, heap %.0f MiB", res.ResyncSeconds, res.ResyncWrites, res.ResyncRenders,
		res.RSSBytes/(1<<20), res.HeapInuseBytes/(1<<20))
	waitProfile()
	if res.QuietLoadAverage == "" { // a fleet settled under another count, or attached
		measureQuiet(b, f, p, time.Now(), &res)
	}
	p.stop()

	// Edits while the fleet resyncs (a restart): the time from a NodePool
	// edit to its MachineDeployment's patch.
	p = f.start(b)
	waitReconciles(b, p, 1)
	res.EditToPatchP50Seconds, res.EditToPatchP99Seconds = editLatencies(b, f.env, nsOf, n)
	waitReconciles(b, p, n)

	// A management bump across the fleet.
	missed, composed, cpu, writes := p.renders(b, "miss"), p.renders(b, "composed"), p.sum(b, "process_cpu_seconds_total", nil), p.writes(b)
	apiCPU, etcdCPU := childCPU("kube-apiserver"), childCPU("etcd")
	t2 := time.Now()
	waitProfile = profile(b, "bump-"+tag, 30+n/250)
	waitAPIProfile := apiServerProfile(b, f.env.Config, "apiserver-bump-"+tag, 15+n/250)
	// A version no earlier run used, and each pool's pending changes
	// before it: an attached fleet (AttachEnv) may show an earlier bump's
	// drift already, and the bump is seen when a pool's pending changes
	// are new.
	before := pw.pendingChanges()
	must(b, c.Update(ctx, withVersion(b, c, managementConfig(int(time.Now().Unix())))))
	pw.waitAll(b, n, "every pool shows the drift", func(p *nodepoolv1.NodePool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, nodepoolv1.ConditionConfigUpdatePending) &&
			pendingOf(p) != before[client.ObjectKeyFromObject(p)]
	})
	res.BumpSeconds = time.Since(t2).Seconds()
	res.BumpRenders, res.BumpComposes = p.renders(b, "miss")-missed, p.renders(b, "composed")-composed
	res.BumpWrites = p.writes(b) - writes
	res.BumpCPUSeconds = p.sum(b, "process_cpu_seconds_total", nil) - cpu
	res.BumpAPIServerCPU, res.BumpEtcdCPU = childCPU("kube-apiserver")-apiCPU, childCPU("etcd")-etcdCPU
	after := dataSecretNames(b, c, ns)
	for k, v := range targets {
		if after[k] != v {
			res.PoolsRolled++
		}
	}
	// The drift events are written after the status, each by its own
	// goroutine of the event recorder: on a large fleet many are still
	// to come when the last pool shows the drift. Count them once the
	// controller is quiet.
	quiet(b, p)
	res.BumpWritesQuiet = p.writes(b) - writes
	res.BumpEvents = driftEvents(b, c, t2)
	res.LoadAverage = loadAverage()
	b.Logf("management bump visible on every pool after %.2f s, %d rolled, %.0f renders, %.0f composes, %.0f writes then (%.0f once quiet), %d drift events",
		res.BumpSeconds, res.PoolsRolled, res.BumpRenders, res.BumpComposes, res.BumpWrites, res.BumpWritesQuiet, res.BumpEvents)
	waitProfile()
	waitAPIProfile()
	p.stop()
	return res
}

func withVersion(b *testing.B, c client.Client, cm *corev1.ConfigMap) *corev1.ConfigMap {
	cur := &corev1.ConfigMap{}
	must(b, c.Get(context.Background(), client.ObjectKeyFromObject(cm), cur))
	cm.ResourceVersion = cur.ResourceVersion
	return cm
}

// editLatencies edits the surge of 100 Replace pools (even numbers), one
// every 50 ms, and times each until a watch of that pool's MachineDeployment
// shows it. Each edit has its own watch, selected by name: a watch of every
// MachineDeployment of a 10,000-pool fleet delivers 10,000 objects first,
// and a test process starved of CPU beside the control plane falls behind.
func editLatencies(b *testing.B, env *harness.Env, nsOf func(int) string, n int) (p50, p99 float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	must(b, err)
	var mu sync.Mutex
	seen := map[string]float64{}
	edits := min(100, n/2)
	for i := range edits {
		k := (i * n / edits) &^ 1
		name := fmt.Sprintf("pool-%05d", k)
		// From the list's resourceVersion, not the object's: a settled
		// object's is older than the API server's watch window ("too old
		// resource version") once the fleet has written more since.
		byName := []client.ListOption{client.InNamespace(nsOf(k)), client.MatchingFields{"metadata.name": name}}
		mds := &clusterv1.MachineDeploymentList{}
		must(b, env.Client.List(ctx, mds, byName...))
		w, err := wc.Watch(ctx, &clusterv1.MachineDeploymentList{}, append(byName, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: mds.ResourceVersion}})...)
		must(b, err)
		pool := &nodepoolv1.NodePool{}
		must(b, env.Client.Get(ctx, client.ObjectKey{Namespace: nsOf(k), Name: name}, pool))
		patch := client.MergeFrom(pool.DeepCopy())
		// One more than now: an attached fleet (AttachEnv) may have been edited by an earlier run.
		want := 2
		if cur := pool.Spec.Management.Replace.RollingUpdate.MaxSurge; cur != nil && cur.Type == intstr.Int {
			want = cur.IntValue() + 1
		}
		pool.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt(want))
		started := time.Now()
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				md, ok := ev.Object.(*clusterv1.MachineDeployment)
				if !ok {
					b.Errorf("watching MachineDeployment %s: %v", name, ev.Object)
					return
				}
				if s := md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; s != nil && s.IntValue() == want {
					mu.Lock()
					seen[name] = time.Since(started).Seconds()
					mu.Unlock()
					return
				}
			}
		}()
		must(b, env.Client.Patch(ctx, pool, patch))
		time.Sleep(50 * time.Millisecond)
	}
	waitUntil(b, 10*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == edits || b.Failed()
	})
	if b.Failed() {
		b.FailNow()
	}
	lat := make([]float64, 0, edits)
	mu.Lock()
	for _, v := range seen {
		lat = append(lat, v)
	}
	mu.Unlock()
	sort.Float64s(lat)
	return lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
}

func waitAll(b *testing.B, c client.Client, ns string, n int, what string, ok func(*nodepoolv1.NodePool) bool) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Minute)
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
		// A list of the fleet costs the API server (and the machine) too.
		time.Sleep(time.Duration(300+n/5) * time.Millisecond)
	}
	b.Fatalf("timed out waiting for %s", what)
}

// poolWatch follows every NodePool through an informer, so that waiting
// for a condition on the whole fleet costs no list of it (a list of 10,000
// pools is tens of MB for the API server to send) and sees the moment the
// last pool met it. An informer, not a bare watch: a watch the API server
// closes (a watcher it finds too slow, during a 10,000-pool settle, is
// closed hundreds of times) is resumed from its last resourceVersion, where
// a bare watch reopened from nothing replays every pool first, falls behind
// again and is closed again, and never catches up.
type poolWatch struct {
	mu      sync.Mutex
	pools   map[client.ObjectKey]*nodepoolv1.NodePool
	changed chan struct{}
	// stop ends the watch.
	stop context.CancelFunc
}

func watchPools(b *testing.B, cfg *rest.Config, scheme *kruntime.Scheme) *poolWatch {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	pw := &poolWatch{pools: map[client.ObjectKey]*nodepoolv1.NodePool{}, changed: make(chan struct{}, 1), stop: cancel}
	informers, err := crcache.New(cfg, crcache.Options{Scheme: scheme})
	must(b, err)
	inf, err := informers.GetInformer(ctx, &nodepoolv1.NodePool{})
	must(b, err)
	set := func(obj any, deleted bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*nodepoolv1.NodePool)
		if !ok {
			return
		}
		pw.mu.Lock()
		if deleted {
			delete(pw.pools, client.ObjectKeyFromObject(p))
		} else {
			pw.pools[client.ObjectKeyFromObject(p)] = p
		}
		pw.mu.Unlock()
		select {
		case pw.changed <- struct{}{}:
		default:
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { set(o, false) },
		UpdateFunc: func(_, o any) { set(o, false) },
		DeleteFunc: func(o any) { set(o, true) },
	})
	must(b, err)
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		b.Fatal("the benchmark's informer of NodePools did not sync")
	}
	// Synced is the informer's store; its handler may still be adding.
	list := &nodepoolv1.NodePoolList{}
	must(b, informers.List(ctx, list))
	waitUntil(b, 10*time.Minute, func() bool {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		return len(pw.pools) >= len(list.Items)
	})
	return pw
}

// pendingChanges is every pool's pendingOf.
func (pw *poolWatch) pendingChanges() map[client.ObjectKey]string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := make(map[client.ObjectKey]string, len(pw.pools))
	for k, p := range pw.pools {
		out[k] = pendingOf(p)
	}
	return out
}

// pendingOf is what a pool's pending management changes desire.
func pendingOf(p *nodepoolv1.NodePool) string {
	var out strings.Builder
	for _, c := range p.Status.PendingManagementChanges {
		out.WriteString(c.Component + "=" + c.Desired + ";")
	}
	return out.String()
}

// waitAll waits until n pools meet ok.
func (pw *poolWatch) waitAll(b *testing.B, n int, what string, ok func(*nodepoolv1.NodePool) bool) {
	b.Helper()
	deadline := time.After(120 * time.Minute)
	// A check reads every pool: made at every event, it would be
	// quadratic in the fleet and hold up the watch that feeds it (a
	// 10,000-pool fleet was seen settled 16 minutes after a list showed
	// it). Events are coalesced instead: a check at most every 10 µs a
	// pool (100 ms at 10,000).
	every := max(10*time.Millisecond, time.Duration(n)*10*time.Microsecond)
	start, reported := time.Now(), time.Now()
	for {
		pw.mu.Lock()
		good := 0
		for _, p := range pw.pools {
			if ok(p) {
				good++
			}
		}
		pw.mu.Unlock()
		if good >= n {
			return
		}
		if time.Since(reported) >= time.Minute { // progress of a long wait, live when the test binary runs directly
			reported = time.Now()
			fmt.Printf("%s: %d of %d after %s\n", what, good, n, time.Since(start).Round(time.Second))
		}
		select {
		case <-pw.changed:
			time.Sleep(every)
		case <-time.After(time.Second):
		case <-deadline:
			b.Fatalf("timed out waiting for %s (%d of %d)", what, good, n)
		}
	}
}

func dataSecretNames(b *testing.B, c client.Client, ns string) map[string]string {
	b.Helper()
	list := &clusterv1.MachineDeploymentList{}
	must(b, c.List(context.Background(), list, client.InNamespace(ns)))
	out := map[string]string{}
	for _, md := range list.Items {
		out[md.Name] = ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	}
	sets := &clusterv1.MachineSetList{}
	must(b, c.List(context.Background(), sets, client.InNamespace(ns), client.HasLabels{nodepoolv1.LabelPool}))
	for _, ms := range sets.Items {
		if _, md := ms.Labels[clusterv1.MachineDeploymentNameLabel]; !md {
			out[ms.Name] = ptr.Deref(ms.Spec.Template.Spec.Bootstrap.DataSecretName, "") // an InPlace pool's
		}
	}
	return out
}

// driftEvents counts the ManagementConfigDrift events of NodePools
// recorded since since, in every namespace, by pages.
func driftEvents(b *testing.B, c client.Client, since time.Time) int {
	b.Helper()
	n := 0
	opts := []client.ListOption{client.Limit(500), client.MatchingFields{"reason": nodepoolv1.EventManagementConfigDrift}}
	for cont := ""; ; {
		events := &corev1.EventList{}
		must(b, c.List(context.Background(), events, append(opts, client.Continue(cont))...))
		for _, e := range events.Items {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.LastTimestamp.Time
			}
			if e.InvolvedObject.Kind == "NodePool" && !at.Before(since.Truncate(time.Second)) {
				n++
			}
		}
		if cont = events.Continue; cont == "" {
			return n
		}
	}
}

// quiet waits until the controller has neither reconciled nor written
// for 5 s.
func quiet(b *testing.B, p controllers) {
	b.Helper()
	last, since := -1.0, time.Now()
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		now := p.reconciles(b) + p.writes(b)
		if now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > 5*time.Second {
			return
		}
	}
	// Cluster API may still be writing statuses of a large fleet, each
	// waking its pool: the figures that follow are taken anyway, and say so.
	b.Logf("the controller did not go quiet in 10 minutes (Cluster API status updates keep waking pools); measuring anyway")
}

// waitReconciles waits until the controller has reconciled at least n
// pools (since it started) and returns when the n-th was counted.
func waitReconciles(b *testing.B, p controllers, n int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Minute)
	// Every scrape has the controller gather every pool's metric series
	// (only the names asked for are encoded): polled every 100 ms, a fleet
	// of 10,000 would spend its CPU on the benchmark's scrapes rather than
	// its reconciles. Every 100 ms up to 1,000 pools, then 100 µs a pool
	// (1 s at 10,000): the figure is at most that late.
	every := max(100*time.Millisecond, time.Duration(n)*100*time.Microsecond)
	for time.Now().Before(deadline) {
		if p.reconciles(b) >= float64(n) {
			return
		}
		time.Sleep(every)
	}
	b.Fatalf("the controller did not reconcile %d pools", n)
}
