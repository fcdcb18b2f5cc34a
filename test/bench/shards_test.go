package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ShardsEnv lists the shard counts BenchmarkFleet runs each fleet with,
// comma-separated (default 1: the unsharded controller). The fleet
// settles under the first; each further count restarts the controller as
// that many shards on the settled fleet (namespaces dealt round-robin)
// and measures it again: the quiet phase, resync, memory, edits and bump.
const ShardsEnv = "NODEPOOL_BENCH_SHARDS"

// shardCounts is ShardsEnv's counts.
func shardCounts(b *testing.B) []int {
	v := os.Getenv(ShardsEnv)
	if v == "" {
		return []int{1}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k <= 0 {
			b.Fatalf("%s=%q: want positive numbers, comma-separated", ShardsEnv, v)
		}
		out = append(out, k)
	}
	return out
}

// shardArgs are the flags of each of k shards over namespaces, dealt
// round-robin: none for one (the unsharded controller).
func shardArgs(k int, namespaces []string) [][]string {
	if k == 1 {
		return [][]string{nil}
	}
	owned := make([][]string, k)
	for i, ns := range namespaces {
		owned[i%k] = append(owned[i%k], ns)
	}
	out := make([][]string, k)
	for i := range out {
		out[i] = []string{"--shard", fmt.Sprintf("bench-%d", i), "--namespaces", strings.Join(owned[i], ",")}
	}
	return out
}

// controllers is a fleet's controller: one process, or one per shard. Its
// figures are the sum of its processes'.
type controllers []*controllerProcess

func (cs controllers) sum(b *testing.B, name string, match func(map[string]string) bool) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.sum(b, name, match) })
}

func (cs controllers) each(f func(*controllerProcess) float64) float64 {
	total := 0.0
	for _, p := range cs {
		total += f(p)
	}
	return total
}

func (cs controllers) reconciles(b *testing.B) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.reconciles(b) })
}

func (cs controllers) writes(b *testing.B) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.writes(b) })
}

func (cs controllers) renders(b *testing.B, result string) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.renders(b, result) })
}

func (cs controllers) capiUpdates(b *testing.B, result string) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.capiUpdates(b, result) })
}

func (cs controllers) rss(b *testing.B) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.rss(b) })
}

func (cs controllers) heapInuse(b *testing.B) float64 {
	return cs.each(func(p *controllerProcess) float64 { return p.heapInuse(b) })
}

// largest is the largest resident set and heap in use of one process.
func (cs controllers) largest(b *testing.B) (rss, heap float64) {
	for _, p := range cs {
		rss, heap = max(rss, p.rss(b)), max(heap, p.heapInuse(b))
	}
	return rss, heap
}

func (cs controllers) collectGarbage(b *testing.B) {
	for _, p := range cs {
		p.collectGarbage(b)
	}
}

func (cs controllers) stop() {
	for _, p := range cs {
		p.stop()
	}
}
