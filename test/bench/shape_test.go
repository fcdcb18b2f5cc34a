package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// Environment of the fleet's shape (BenchmarkFleet and
// BenchmarkWavedPlatformRollout).
const (
	// ShapesEnv lists the shapes each fleet size of BenchmarkFleet is
	// measured in, comma-separated (default "clusters"):
	//
	//   - clusters: many Clusters of 1 to 8 pools each (clusterSizes, a
	//     fixed, seeded distribution), as real fleets are shaped, the
	//     Clusters spread over namespaces of at most PerNamespaceEnv pools;
	//   - one-cluster: the shape of the benchmark before 2026-12-05, one
	//     Cluster per namespace holding all of its PerNamespaceEnv pools
	//     (1,000 by default): its Cluster reconciler in Cluster API
	//     aggregates the conditions of 1,000 MachineDeployments at each
	//     change, a cost of the shape, not of nodepool.
	//
	// BenchmarkWavedPlatformRollout takes the first.
	ShapesEnv = "NODEPOOL_BENCH_SHAPES"
	// PoolMachinesEnv is how many machines each pool runs (default 2): the
	// settle boots them, the bump and the fleet rollout see them.
	PoolMachinesEnv = "NODEPOOL_BENCH_POOL_MACHINES"
)

const (
	shapeClusters   = "clusters"
	shapeOneCluster = "one-cluster"
)

// clusterSizeSeed seeds the draw of the Clusters' sizes: the same fleet
// size is always the same fleet.
const clusterSizeSeed = 44

// clusterSizeWeights are the chances of a Cluster having 1, 2, ... 8 pools
// (percent): most Clusters have one to three pools, a few up to eight;
// about 3.1 pools a Cluster on average (300 pools are 88 Clusters,
// 1,000 pools 323, 10,000 pools 3,251).
var clusterSizeWeights = [8]int{25, 25, 15, 12, 8, 6, 5, 4}

// clusterSizes is the number of pools of each Cluster of a fleet of n
// pools, drawn from clusterSizeWeights with a PCG seeded by
// clusterSizeSeed (the last Cluster cut to fit n).
func clusterSizes(n int) []int {
	r := rand.New(rand.NewPCG(clusterSizeSeed, 0))
	var out []int
	for left := n; left > 0; {
		x, size := r.IntN(100), 1
		for i, w := range clusterSizeWeights {
			if x < w {
				size = i + 1
				break
			}
			x -= w
		}
		size = min(size, left)
		out = append(out, size)
		left -= size
	}
	return out
}

// fleetLayout places a fleet's pools: pool i lives in namespace ns[i],
// in the Cluster cluster[i] of that namespace.
type fleetLayout struct {
	shape      string
	ns         []string
	cluster    []string
	namespaces []string
	// clusters are each namespace's Clusters, in order.
	clusters map[string][]string
}

func (l *fleetLayout) nsOf(i int) string { return l.ns[i] }

// clusterCount is how many Clusters the fleet has.
func (l *fleetLayout) clusterCount() int {
	n := 0
	for _, cs := range l.clusters {
		n += len(cs)
	}
	return n
}

// shapes is ShapesEnv's list.
func shapes(b *testing.B) []string {
	v := os.Getenv(ShapesEnv)
	if v == "" {
		return []string{shapeClusters}
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s != shapeClusters && s != shapeOneCluster {
			b.Fatalf("%s=%q: want %s or %s, comma-separated", ShapesEnv, v, shapeClusters, shapeOneCluster)
		}
		out = append(out, s)
	}
	return out
}

// poolMachines is PoolMachinesEnv's count.
func poolMachines(b *testing.B) int32 {
	v := os.Getenv(PoolMachinesEnv)
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a number", PoolMachinesEnv, v)
	}
	return int32(n)
}

// perNamespace is PerNamespaceEnv's count (default 1000), no more than
// leaves the most shards of counts a namespace each.
func perNamespace(b *testing.B, n int, counts []int) int {
	per := 1000
	if v := os.Getenv(PerNamespaceEnv); v != "" {
		var err error
		if per, err = strconv.Atoi(v); err != nil || per <= 0 {
			b.Fatalf("%s=%q: want a positive number", PerNamespaceEnv, v)
		}
	}
	if len(counts) > 0 {
		per = min(per, (n+slices.Max(counts)-1)/slices.Max(counts))
	}
	return max(per, 1)
}

// layoutFleet places n pools in shape. Namespaces hold at most
// perNamespace pools (a Cluster is never split between two).
func layoutFleet(b *testing.B, shape string, n int, counts []int) *fleetLayout {
	per := perNamespace(b, n, counts)
	l := &fleetLayout{shape: shape, ns: make([]string, n), cluster: make([]string, n), clusters: map[string][]string{}}
	var sizes []int
	switch shape {
	case shapeOneCluster:
		for left := n; left > 0; left -= per {
			sizes = append(sizes, min(per, left))
		}
	default:
		sizes = clusterSizes(n)
	}
	i, inNS := 0, 0
	nsIndex := 0
	for k, size := range sizes {
		if inNS > 0 && inNS+size > per {
			nsIndex, inNS = nsIndex+1, 0
		}
		ns := fmt.Sprintf("fleet-%02d", nsIndex)
		if inNS == 0 {
			l.namespaces = append(l.namespaces, ns)
		}
		name := "c1"
		if shape != shapeOneCluster {
			name = fmt.Sprintf("c-%05d", k)
		}
		l.clusters[ns] = append(l.clusters[ns], name)
		for range size {
			l.ns[i], l.cluster[i] = ns, name
			i++
		}
		inNS += size
	}
	return l
}

// create makes every namespace of the layout with what its pools read
// (the template small, the user config chrony) and its Clusters, 16 at a
// time.
func (l *fleetLayout) create(b *testing.B, c client.Client) {
	ctx := context.Background()
	for _, ns := range l.namespaces {
		must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		must(b, simtest.CreateMachineTemplate(ctx, c, ns, "small", simv1.SimMachineSpec{}))
		must(b, c.Create(ctx, chrony(ns, "ntp")))
	}
	var wg sync.WaitGroup
	work := make(chan [2]string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				_, err := simtest.CreateCluster(ctx, c, w[0], w[1])
				must(b, err)
			}
		}()
	}
	for _, ns := range l.namespaces {
		for _, name := range l.clusters[ns] {
			work <- [2]string{ns, name}
		}
	}
	close(work)
	wg.Wait()
}

// describe is the shape in words, for the table and the logs.
func (l *fleetLayout) describe() string {
	return fmt.Sprintf("%s: %d Clusters in %d namespaces", l.shape, l.clusterCount(), len(l.namespaces))
}
