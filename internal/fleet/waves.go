// Package fleet decides the next step of a FleetRollout: which pools it
// selected and in which wave (fixed at the start), which pools start now,
// when a wave is complete and the next one may start after its soak, and
// when the rollout stops. It is pure: the controller observes the pools,
// calls Decide, writes the status it returns and then annotates the pools
// it names.
package fleet

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Ref names a pool.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// RefOf is the Ref of a pool of a fleet rollout's status.
func RefOf(p nodepoolv1.FleetRolloutPool) Ref { return Ref{Namespace: p.Namespace, Name: p.Name} }

// WaveSizes returns how many pools each wave holds, out of n selected
// pools: each wave is a cumulative count or percentage (rounded up) of n,
// capped at n; a wave whose cumulative count is not above the previous
// one's is empty. Pools beyond the last wave's cumulative count are in no
// wave.
func WaveSizes(waves []intstr.IntOrString, n int) []int {
	sizes := make([]int, len(waves))
	prev := 0
	for i, w := range waves {
		c, err := intstr.GetScaledValueFromIntOrPercent(&w, n, true)
		if err != nil || c < 0 {
			c = 0
		}
		c = min(c, n)
		if c > prev {
			sizes[i] = c - prev
			prev = c
		}
	}
	return sizes
}

// Assign fixes a rollout's selection: the pools in namespace/name order,
// each in its wave (state Pending), and one count row per wave. Pools
// beyond the last wave are left out.
func Assign(pools []Ref, waves []intstr.IntOrString) ([]nodepoolv1.FleetRolloutPool, []nodepoolv1.FleetRolloutWave) {
	sorted := append([]Ref(nil), pools...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	sizes := WaveSizes(waves, len(sorted))
	var out []nodepoolv1.FleetRolloutPool
	rows := make([]nodepoolv1.FleetRolloutWave, len(waves))
	next := 0
	for w, size := range sizes {
		rows[w] = nodepoolv1.FleetRolloutWave{Wave: int32(w + 1), Pools: int32(size), Pending: int32(size)}
		for range size {
			r := sorted[next]
			next++
			out = append(out, nodepoolv1.FleetRolloutPool{Namespace: r.Namespace, Name: r.Name, Wave: int32(w + 1), State: nodepoolv1.FleetPoolPending})
		}
	}
	return out, rows
}

// Count recomputes the per-wave counts from the members' states. A
// wave's pools are fixed at the start: a member missing (its pool
// deleted, with its kept state) counts as skipped.
func Count(pools []nodepoolv1.FleetRolloutPool, rows []nodepoolv1.FleetRolloutWave) {
	seen := make([]int32, len(rows))
	for i := range rows {
		r := &rows[i]
		r.Pending, r.Waiting, r.Rolling, r.Done, r.Skipped, r.Failed, r.TakenOver = 0, 0, 0, 0, 0, 0, 0
	}
	for _, p := range pools {
		if p.Wave < 1 || int(p.Wave) > len(rows) {
			continue
		}
		r := &rows[p.Wave-1]
		seen[p.Wave-1]++
		switch p.State {
		case nodepoolv1.FleetPoolPending:
			r.Pending++
		case nodepoolv1.FleetPoolWaiting:
			r.Waiting++
		case nodepoolv1.FleetPoolRolling:
			r.Rolling++
		case nodepoolv1.FleetPoolDone:
			r.Done++
		case nodepoolv1.FleetPoolSkipped:
			r.Skipped++
		case nodepoolv1.FleetPoolFailed:
			r.Failed++
		case nodepoolv1.FleetPoolTakenOver:
			r.TakenOver++
		}
	}
	for i := range rows {
		if seen[i] > rows[i].Pools {
			rows[i].Pools = seen[i]
		}
		rows[i].Skipped += rows[i].Pools - seen[i]
	}
}

// Start is the status of a fleet rollout that starts now with the
// selected pools, and the members to keep on the pools (every pool with
// its wave, Pending): the first wave next. The status holds the waves'
// sizes, not the pools: the controller writes each member's state on its
// pool before the status.
func Start(pools []Ref, waves []intstr.IntOrString, now metav1.Time) (nodepoolv1.FleetRolloutStatus, []nodepoolv1.FleetRolloutPool) {
	assigned, rows := Assign(pools, waves)
	return nodepoolv1.FleetRolloutStatus{
		Phase: nodepoolv1.FleetPhaseProgressing, StartedAt: &now, CurrentWave: 1,
		Waves:   rows,
		Message: fmt.Sprintf("selected %d pools in %d waves", len(assigned), len(rows)),
	}, assigned
}
