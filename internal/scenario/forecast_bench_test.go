package scenario

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// forecastFleet is a forecast's input over n pools drawn from seed, the
// shapes of the scenario engine's random fleets: 1–5 machines, maxSurge
// 0–2, maxUnavailable 0–1, a third InPlace-free policy mix, half with a
// health gate, half with a daily window in one of three zones, and a
// history of 0–5 rollouts whose rounds took 1–6 minutes.
func forecastFleet(n int, seed int64, now time.Time) ForecastInput {
	r := rand.New(rand.NewSource(seed))
	zones := []string{"Europe/Berlin", "America/New_York", "UTC"}
	in := ForecastInput{Now: now, Horizon: 10 * 24 * time.Hour}
	for i := range n {
		replicas := int32(1 + r.Intn(5))
		np := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i/8), Name: fmt.Sprintf("pool-%d", i), Labels: map[string]string{"fleet": "all"}}}
		np.Spec.ClusterName, np.Spec.Replicas, np.Spec.Release.Version = fmt.Sprintf("c-%d", i/8), ptr.To(replicas), "v1.36.3"
		np.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "DockerMachineTemplate", APIGroup: "infrastructure.cluster.x-k8s.io", Name: "tmpl"}
		m := &np.Spec.Management
		m.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(int32(1 + r.Intn(2))))
		m.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(int32(r.Intn(2))))
		m.ManagementUpdates = []nodepoolv1.ManagementUpdatePolicy{nodepoolv1.ManagementUpdatesOnNextRollout, nodepoolv1.ManagementUpdatesRollout, nodepoolv1.ManagementUpdatesRollout}[r.Intn(3)]
		if r.Intn(2) == 0 {
			m.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Duration(r.Intn(30)) * time.Minute},
				Soak: &metav1.Duration{Duration: time.Duration(r.Intn(5)) * time.Minute}, FailurePolicy: nodepoolv1.FailurePolicyHalt}
		}
		if r.Intn(2) == 0 {
			m.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{Schedule: fmt.Sprintf("0 %d * * *", r.Intn(24)),
				Duration: metav1.Duration{Duration: time.Duration(2+r.Intn(3)) * time.Hour}, TimeZone: zones[r.Intn(len(zones))]}}}
			if r.Intn(2) == 0 {
				m.Maintenance.DriftDeadline = &metav1.Duration{Duration: time.Duration(24+r.Intn(72)) * time.Hour}
			}
		}
		fp := ForecastPool{Pool: np, Machines: replicas, Change: []ForecastChange{{Component: inputs.ProxyDefaults}}}
		if shape, ok := poolmath.ShapeOf(&np.Spec, replicas, replicas); ok {
			per := time.Duration(1+r.Intn(6)) * time.Minute
			for range r.Intn(6) {
				took := shape.Soak + time.Duration(shape.Rounds)*(per+time.Duration(r.Intn(60))*time.Second)
				fp.Past = append(fp.Past, poolmath.PastRollout{Shape: shape, Took: took, Complete: true})
			}
		}
		in.Pools = append(in.Pools, fp)
	}
	return in
}

// BenchmarkForecast is RunForecast over 100, 1,000 and 10,000 pools of
// the random fleet's shapes, no fleet rollout: every pool is forecast on
// its own. Besides the wall time (ns/op) it reports the process's CPU
// seconds an op (cpu-s/op: what the wall time is on an idle machine
// times its cores) and the pools that roll within the horizon.
func BenchmarkForecast(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			in := forecastFleet(n, 1, t0)
			b.ResetTimer()
			cpu := processCPU()
			rolled := 0
			for range b.N {
				fc := RunForecast(in)
				if len(fc.Pools) != n {
					b.Fatalf("%d pools forecast, want %d", len(fc.Pools), n)
				}
				rolled = 0
				for _, p := range fc.Pools {
					if p.End != nil {
						rolled++
					}
				}
			}
			b.ReportMetric((processCPU()-cpu).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(rolled), "pools-rolled")
		})
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFleetForecast is RunForecast of a fleet rollout (waves 1, 10%,
// 100%; its pools apply the platform change) over 100, 1,000, 3,000 and
// 10,000 pools of the random fleet's shapes: the controller's
// predictedCompletion. The fleet rollout's pools are one world (its
// waves join them), so this is the forecast that can grow faster than
// the fleet.
func BenchmarkFleetForecast(b *testing.B) {
	for _, n := range []int{100, 1000, 3000, 10000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			in := forecastFleet(n, 1, t0)
			in.Fleet = &ForecastFleet{Name: "platform", Spec: nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending,
				Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("10%"), intstr.FromString("100%")}}}
			for _, fp := range in.Pools {
				in.Fleet.Pools = append(in.Fleet.Pools, fleet.Ref{Namespace: fp.Pool.Namespace, Name: fp.Pool.Name})
			}
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				fc := RunForecast(in)
				if fc.FleetEnd == nil {
					b.Fatalf("no fleet end forecast: %v", fc.Notes)
				}
			}
			b.ReportMetric((processCPU()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
