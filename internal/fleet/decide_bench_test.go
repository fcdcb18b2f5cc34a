package fleet

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// decideInput is a fleet rollout of n pools (waves 1, 10%, 100%) in its
// last wave, as its controller sees it at a reconcile: the first two waves
// done, of the last a third done, a third rolling (half of them with their
// history record in progress) and a third not yet triggered; members in
// namespace/name order, as the controller hands them (it sorts them).
func decideInput(n int) Input {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-time.Hour))
	var refs []Ref
	for i := range n {
		refs = append(refs, Ref{Namespace: fmt.Sprintf("fleet-%02d", i/1000), Name: fmt.Sprintf("pool-%05d", i)})
	}
	members, rows := Assign(refs, waves(1, "10%", "100%"))
	st := nodepoolv1.FleetRolloutStatus{Phase: nodepoolv1.FleetPhaseProgressing, StartedAt: &started, CurrentWave: 3, Waves: rows}
	for w := range 2 {
		st.Waves[w].StartedAt, st.Waves[w].CompletedAt = &started, &started
	}
	st.Waves[2].StartedAt = &started
	pools := map[Ref]Pool{}
	trig := metav1.NewTime(now.Add(-10 * time.Minute))
	for i := range members {
		m := &members[i]
		obs := Pool{Exists: true, Ready: true, Settled: true, Replicas: 2}
		switch {
		case m.Wave < 3 || i%3 == 0:
			m.State, m.TriggeredAt, m.Revision = nodepoolv1.FleetPoolDone, &trig, 2
		case i%3 == 1:
			m.State, m.TriggeredAt = nodepoolv1.FleetPoolRolling, &trig
			obs.Fleet, obs.At, obs.Updating, obs.Settled = "bench", trig.UTC().Format(time.RFC3339), true, false
			if i%2 == 0 {
				obs.Record = &Record{Revision: 2, Outcome: "InProgress", Initiator: nodepoolv1.FleetRolloutInitiator("bench")}
			}
		default:
			m.State = nodepoolv1.FleetPoolPending
		}
		pools[RefOf(*m)] = obs
	}
	return Input{Name: "bench", Spec: nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionRestart, Waves: waves(1, "10%", "100%")},
		Status: st, Generation: 1, Members: members, Pools: pools, Now: now}
}

// BenchmarkDecide is one decision of a fleet rollout over 300, 1,000 and
// 3,000 pools (decideInput): the controller makes one at each reconcile,
// so its cost a pool must not grow with the fleet. ns/pool is wall time,
// cpu-ns/pool the process's CPU time (garbage collection included): on a
// shared machine the wall time follows the other work, the CPU time less.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{300, 1000, 3000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			in := decideInput(n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				Decide(in)
			}
			cpu = cpuTime() - cpu
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pool")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/pool")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
