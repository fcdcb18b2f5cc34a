package controller

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// cachedPools is a client whose lists of NodePools are the pools given,
// not copied: what the controller's cache gives a list with
// UnsafeDisableDeepCopy (the fake client copies every object, which would
// be most of what is measured).
type cachedPools struct {
	client.Client
	pools []nodepoolv1.NodePool
}

func (c cachedPools) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*nodepoolv1.NodePoolList); ok {
		l.Items = c.pools
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// BenchmarkFleetRolloutReconcile is one reconcile of a fleet rollout over
// 300, 1,000 and 3,000 pools (waves 1, 10%, 100%) in its last wave, as
// most of its reconciles are: the first two waves and a third of the last
// done, the rest rolling (a pool's event woke it, nothing is to be
// written). It reads every member (its kept state, its observation) and
// decides over all of them, so its cost a pool (ns/pool, cpu-ns/pool: the
// process's CPU, garbage collection included) must not grow with the
// fleet; the rollout's reconciles are then bounded by its time, its
// events batched (fleet.Batch).
func BenchmarkFleetRolloutReconcile(b *testing.B) {
	for _, n := range []int{300, 1000, 3000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			ctx := context.Background()
			now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
			started := metav1.NewTime(now.Add(-time.Hour))
			trig := metav1.NewTime(now.Add(-10 * time.Minute))
			spec := nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionRestart,
				Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("10%"), intstr.FromString("100%")}}
			var refs []fleet.Ref
			for i := range n {
				refs = append(refs, fleet.Ref{Namespace: fmt.Sprintf("fleet-%02d", i/1000), Name: fmt.Sprintf("pool-%05d", i)})
			}
			members, rows := fleet.Assign(refs, spec.Waves)
			pools := make([]nodepoolv1.NodePool, n)
			for i := range members {
				m := &members[i]
				p := &pools[i]
				p.Namespace, p.Name, p.Generation, p.ResourceVersion = m.Namespace, m.Name, 2, "1"
				p.UID = types.UID("uid-" + p.Name)
				p.Status = nodepoolv1.NodePoolStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2}
				p.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AsExpected"}}
				if m.Wave < 3 || i%3 == 0 {
					m.State, m.TriggeredAt, m.Revision, m.Message = nodepoolv1.FleetPoolDone, &trig, 2, ""
					p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseSettled, Settled: true}
					p.Annotations = map[string]string{nodepoolv1.FleetRolloutPoolAnnotation("bench"): fleet.Encode(*m)}
					continue
				}
				m.State, m.TriggeredAt, m.Revision = nodepoolv1.FleetPoolRolling, &trig, 2
				p.Status.Updating = "Forced"
				p.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseRolling}
				p.Annotations = map[string]string{nodepoolv1.FleetRolloutPoolAnnotation("bench"): fleet.Encode(*m),
					nodepoolv1.AnnotationApplyPending: trig.UTC().Format(time.RFC3339), nodepoolv1.AnnotationFleetRollout: "bench"}
			}
			st := nodepoolv1.FleetRolloutStatus{Phase: nodepoolv1.FleetPhaseProgressing, StartedAt: &started, CurrentWave: 3, Waves: rows}
			for w := range 2 {
				st.Waves[w].StartedAt, st.Waves[w].CompletedAt = &started, &started
			}
			st.Waves[2].StartedAt = &started
			fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: "bench", Generation: 1}, Spec: spec, Status: st}
			c := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).WithObjects(fr).WithStatusSubresource(&nodepoolv1.FleetRollout{}).Build()
			r := &FleetRolloutReconciler{Client: cachedPools{Client: c, pools: pools}, Recorder: events.NewFakeRecorder(1 << 20), Clock: func() time.Time { return now }}
			r.predicted.keep("bench", prediction{point: predictionPoint(&st)}) // the forecast made: none runs
			// Each rolling pool's record read once: only a pool's history event reads it again.
			for i := range pools {
				p := &pools[i]
				r.records.keep(fleet.Ref{Namespace: p.Namespace, Name: p.Name}, p.UID, trig.Time, 0, &fleet.Record{Revision: 2, Outcome: "InProgress",
					Initiator: nodepoolv1.FleetRolloutInitiator("bench")})
			}
			req := ctrl.Request{NamespacedName: client.ObjectKey{Name: "bench"}}
			if _, err := r.Reconcile(ctx, req); err != nil { // writes the status once
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				if _, err := r.Reconcile(ctx, req); err != nil {
					b.Fatal(err)
				}
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
