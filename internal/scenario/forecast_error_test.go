package scenario

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// forecastErrorKinds are the random fleet's infrastructure templates,
// each with how long its machines take to boot: pools of a kind are
// alike, pools of different kinds are not.
var forecastErrorKinds = []struct {
	kind, group string
	boot        time.Duration
}{
	{"DockerMachineTemplate", "infrastructure.cluster.x-k8s.io", 40 * time.Second},
	{"AWSMachineTemplate", "infrastructure.cluster.x-k8s.io", 4 * time.Minute},
	{"SimMachineTemplate", "infrastructure.sim.nodepool.dev", 9 * time.Minute},
}

// randomForecastFleet is a world drawn from seed as the scenario
// engine's random fleets draw their pools (1–5 machines, maxSurge 0–2,
// maxUnavailable 0–1, a quarter InPlace, half health-gated), each pool on
// one of forecastErrorKinds, its machines booting in the kind's time
// ±25% a rollout, with 0–5 owner rollouts of history. It returns the
// world settled after those, and the pools.
func randomForecastFleet(t *testing.T, seed int64, n int) (*World, []*Pool) {
	r := rand.New(rand.NewSource(seed))
	w := New(t0)
	var pools []*Pool
	boots := map[*Pool]time.Duration{}
	for i := range n {
		k := forecastErrorKinds[r.Intn(len(forecastErrorKinds))]
		replicas := int32(1 + r.Intn(5))
		p := w.AddPool(PoolSpec{Name: fmt.Sprintf("p%02d", i), Replicas: replicas, Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: k.kind, APIGroup: k.group, Name: "tmpl"}
			m := &np.Spec.Management
			m.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			m.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(int32(r.Intn(3))))
			m.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(int32(r.Intn(2))))
			if r.Intn(4) == 0 {
				m.UpgradeType = nodepoolv1.UpgradeTypeInPlace
			}
			if r.Intn(2) == 0 {
				m.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Duration(r.Intn(20)) * time.Minute},
					Soak: &metav1.Duration{Duration: time.Duration(r.Intn(5)) * time.Minute}, FailurePolicy: nodepoolv1.FailurePolicyHalt}
			}
		}})
		boots[p] = k.boot
		jitter := func() time.Duration { return k.boot * time.Duration(75+r.Intn(51)) / 100 }
		p.BootDelay, p.AgentDelay = jitter(), jitter()
		for j := range r.Intn(6) {
			boot, agent := jitter(), jitter()
			w.At(t0.Add(time.Duration(2*j+1)*time.Hour+time.Duration(r.Intn(30))*time.Minute), fmt.Sprintf("owner of %s edits the config", p.Name), func(*World) {
				p.Inputs.Config, p.BootDelay, p.AgentDelay = fmt.Sprintf("c%d", j+2), boot, agent
			})
		}
		pools = append(pools, p)
	}
	run(t, w, 14*time.Hour)
	for _, p := range pools {
		k := boots[p]
		p.BootDelay, p.AgentDelay = k*time.Duration(75+r.Intn(51))/100, k*time.Duration(75+r.Intn(51))/100
	}
	return w, pools
}

// forecastError is |predicted end − actual end| / actual duration.
func forecastError(f PoolForecast, got *Record) float64 {
	took := got.Completed.Sub(got.Started)
	d := f.End.Sub(*got.Completed)
	return float64(max(d, -d)) / float64(max(took, time.Second))
}

// percentile is the p-th percentile (nearest rank) of xs.
func percentile(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := (len(s)*p + 99) / 100
	return s[max(k-1, 0)]
}

// The forecast's error on random fleets: over random pools with 0–5
// rollouts of history, each forecast to roll a platform change, the
// change is then applied and the fleet run. The error of a pool is
// |predicted end − actual end| / actual duration; it is printed as
// median and 90th percentile over every pool, over the young ones (fewer
// than 3 rollouts) predicted from pools like them, and over the same
// young ones forecast alone (no pool like them: the declared settings,
// as before). The pools like them make the young ones' median error
// smaller than the declared settings do.
func TestTheForecastsErrorOnRandomFleets(t *testing.T) {
	var all, own, young, alone, settings []float64
	instant := 0
	for seed := int64(1); seed <= 4; seed++ {
		w, pools := randomForecastFleet(t, seed, 24)
		now := w.Now
		in := ForecastInput{Now: now, Horizon: 2 * 24 * time.Hour}
		for _, p := range pools {
			in.Pools = append(in.Pools, forecastOf(p))
		}
		fc := RunForecast(in)
		lone := map[int]PoolForecast{}
		for i, f := range fc.Pools {
			if f.Prediction.Peers > 0 {
				lone[i] = RunForecast(ForecastInput{Now: now, Horizon: in.Horizon, Pools: in.Pools[i : i+1]}).Pools[0]
			}
		}
		changeProxyDefaults(w, pools...)
		run(t, w, in.Horizon)
		for i, p := range pools {
			f, got := fc.Pools[i], firstRollout(p, now)
			if f.End == nil || got == nil {
				if (f.End == nil) != (got == nil) {
					t.Errorf("seed %d %s (%s): forecast end %v (%s: %s), the fleet rolled it at %v", seed, p.Name, p.Obj.Spec.Management.UpgradeType, f.End, f.When, f.Reason, got.Started)
				}
				continue
			}
			if got.Completed.Sub(got.Started) < time.Second {
				// Done at once in the model (nothing to wait for): no
				// duration to be wrong by a share of.
				instant++
				continue
			}
			e := forecastError(f, got)
			all = append(all, e)
			switch {
			case f.Prediction.Peers > 0:
			case f.Prediction.FromSettings:
				settings = append(settings, e)
			default:
				own = append(own, e)
			}
			if l, ok := lone[i]; ok && l.End != nil {
				young = append(young, e)
				alone = append(alone, forecastError(l, got))
				t.Logf("seed %d %s: %d machines, took %s; from %s: %s (error %.0f%%); alone: %s (error %.0f%%)", seed, p.Name, f.Machines,
					got.Completed.Sub(got.Started), f.Basis, f.Prediction.Likely, 100*e, l.Prediction.Likely, 100*forecastError(l, got))
			}
		}
	}
	if len(young) == 0 || len(all) == 0 {
		t.Fatalf("no young pool predicted from pools like it (%d pools in all)", len(all))
	}
	share := func(what string, xs []float64) {
		t.Logf("  %-62s %3d pools: median %6.1f%%, p90 %7.1f%%", what, len(xs), 100*percentile(xs, 50), 100*percentile(xs, 90))
	}
	t.Logf("forecast error |predicted end − actual end| / actual duration (%d rollouts done at once left out):", instant)
	share("every pool", all)
	share("from its own history (3+ rollouts)", own)
	share("young, from pools like it", young)
	share("  the same young pools forecast alone (declared settings)", alone)
	share("young, no pool like it (declared settings)", settings)
	if percentile(young, 50) >= percentile(alone, 50) {
		t.Errorf("young pools: median error %.1f%% from pools like them, %.1f%% from the declared settings: the pools like them do not help",
			100*percentile(young, 50), 100*percentile(alone, 50))
	}
}
