package scenario

import (
	"fmt"
	"math/rand"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// RandomOptions tune the random interleavings.
type RandomOptions struct {
	Pools  int
	Length time.Duration
	// Events is how many scripted actions are drawn.
	Events int
	// Health, Windows and Bad enable health gates, maintenance settings
	// and bad payloads; Drains a drain policy and a spell of blocked
	// drains (the drain knob) on one pool of every third seed; Wider the
	// events of randomWider; Lag a controller cache behind its own
	// writes to the user-data (World.SecretsLag); Crash a controller that
	// stops right after a MachineDeployment write on every third seed
	// (World.CrashAfterMachineDeployment).
	Health, Windows, Bad, Drains, Wider, Lag, Crash bool
}

// DefaultRandom are the settings of the fixed seeds.
var DefaultRandom = RandomOptions{Pools: 2, Length: 3 * 24 * time.Hour, Events: 12, Health: true, Windows: true, Bad: true, Drains: true, Wider: true, Lag: true, Crash: true}

// Random is a world drawn from a seed: pools with random settings and a
// script of owner edits, platform bumps, forced requests, pauses, bad
// payloads, auto repair, fleet rollouts and controller restarts.
func Random(seed int64, o RandomOptions) *World {
	r := rand.New(rand.NewSource(seed))
	start := time.Date(2026, 10, 19, 9, 0, 0, 0, time.UTC) // the fall-back week of Europe/Berlin and America/New_York
	w := New(start)
	zones := []string{"Europe/Berlin", "America/New_York", "UTC"}
	for i := 0; i < o.Pools; i++ {
		replicas := int32(1 + r.Intn(5))
		w.AddPool(PoolSpec{Name: fmt.Sprintf("p%d", i), Replicas: replicas, Edit: func(np *nodepoolv1.NodePool) {
			m := &np.Spec.Management
			m.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(int32(r.Intn(3))))
			m.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(int32(r.Intn(2))))
			m.ManagementUpdates = []nodepoolv1.ManagementUpdatePolicy{nodepoolv1.ManagementUpdatesOnNextRollout, nodepoolv1.ManagementUpdatesNewNodes, nodepoolv1.ManagementUpdatesRollout}[r.Intn(3)]
			if r.Intn(4) == 0 {
				m.UpgradeType = nodepoolv1.UpgradeTypeInPlace
			}
			if o.Health && r.Intn(2) == 0 {
				m.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Duration(r.Intn(40)) * time.Minute},
					Soak: &metav1.Duration{Duration: time.Duration(r.Intn(10)) * time.Minute}, FailurePolicy: []nodepoolv1.FailurePolicy{nodepoolv1.FailurePolicyHalt, nodepoolv1.FailurePolicyRollback}[r.Intn(2)]}
			}
			if r.Intn(3) == 0 {
				m.AutoRepair = &nodepoolv1.AutoRepair{}
			}
			if o.Windows && r.Intn(2) == 0 {
				mt := &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{Schedule: fmt.Sprintf("0 %d * * *", r.Intn(24)),
					Duration: metav1.Duration{Duration: time.Duration(1+r.Intn(4)) * time.Hour}, TimeZone: zones[r.Intn(len(zones))]}}}
				if r.Intn(2) == 0 {
					mt.Gate = []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}
				}
				if r.Intn(3) == 0 {
					s := start.Add(time.Duration(r.Intn(7*24)) * time.Hour)
					mt.Exclusions = []nodepoolv1.MaintenanceExclusion{{Name: "freeze", Start: metav1.Time{Time: s}, End: metav1.Time{Time: s.Add(time.Duration(1+r.Intn(48)) * time.Hour)},
						Scope: []nodepoolv1.ExclusionScope{nodepoolv1.ExclusionScopeAll, nodepoolv1.ExclusionScopePlatform}[r.Intn(2)]}}
				}
				if r.Intn(2) == 0 {
					mt.DriftDeadline = &metav1.Duration{Duration: time.Duration(24+r.Intn(72)) * time.Hour}
				}
				m.Maintenance = mt
			}
		}})
	}
	rev := 1
	for i := 0; i < o.Events; i++ {
		at := start.Add(time.Duration(r.Int63n(int64(o.Length/time.Second))) * time.Second)
		p := w.pools[r.Intn(len(w.pools))]
		rev++
		v := fmt.Sprintf("%d", rev)
		switch k := r.Intn(10); k {
		case 0, 1:
			bad := o.Bad && r.Intn(4) == 0
			w.At(at, fmt.Sprintf("owner of %s edits the config to c%s (bad %v)", p.Name, v, bad), func(w *World) {
				if bad {
					w.Bad["user-configs=c"+v] = time.Duration(r.Intn(20)) * time.Minute
				}
				p.Inputs.Config = "c" + v
			})
		case 2:
			w.At(at, "platform bumps the renderer to r"+v, func(w *World) {
				for _, q := range w.pools {
					q.Inputs.Platform[CompRenderer] = "r" + v
				}
			})
		case 3:
			w.At(at, "platform rotates the pull secret", func(w *World) {
				for _, q := range w.pools {
					q.Inputs.Platform[CompPullSecret] = "s" + v
				}
			})
		case 4:
			w.At(at, "person runs apply-pending on "+p.Name, func(*World) { ApplyPending(p, "") })
		case 5:
			w.At(at, "owner restarts "+p.Name, func(w *World) { p.Obj.Spec.Management.RolloutAfter = &metav1.Time{Time: w.Now.Truncate(time.Second)} })
		case 6:
			d := time.Duration(1+r.Intn(12)) * time.Hour
			w.At(at, "owner pauses "+p.Name+" for "+d.String(), func(w *World) {
				p.Obj.Spec.Management.PausedUntil = w.Now.Add(d).UTC().Format(time.RFC3339)
			})
		case 7:
			w.At(at, "controller restarts", func(w *World) { w.Restart() })
		case 8:
			n := int32(1 + r.Intn(5))
			w.At(at, fmt.Sprintf("owner scales %s to %d", p.Name, n), func(*World) { p.Obj.Spec.Replicas = &n })
		case 9:
			name := "f" + v
			w.At(at, "fleet rollout "+name, func(w *World) {
				var names []string
				for _, q := range w.pools {
					names = append(names, q.Name)
				}
				w.AddFleet(name, nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending,
					Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")}, HeldPools: nodepoolv1.HeldPoolWait}, names...)
			})
		}
	}
	if o.Drains {
		randomDrains(w, seed, start, o.Length)
	}
	if o.Wider {
		randomWider(w, seed, start, o.Length)
	}
	if o.Lag {
		// From its own source (the rest of a seed's world is the same
		// without it): after half the looks that rewrote a pool's
		// user-data, the controller's cache shows the old user-data for
		// 1 to 5 seconds more.
		lag := rand.New(rand.NewSource(seed ^ 0x5ec7e75))
		w.SecretsLag = func() time.Duration {
			if lag.Intn(2) == 0 {
				return 0
			}
			return time.Duration(1+lag.Intn(5)) * time.Second
		}
	}
	if o.Crash {
		c := rand.New(rand.NewSource(seed ^ 0xc4a54))
		if c.Intn(3) == 0 {
			at := start.Add(time.Duration(c.Int63n(int64(o.Length/time.Second))) * time.Second)
			w.At(at, "the controller will stop right after its next MachineDeployment write", func(w *World) { w.CrashAfterMachineDeployment = true })
		}
	}
	return w
}

// randomWider draws, from its own source (so the rest of a seed's world
// is the same without it), the events where rollouts meet what happens
// around them: on every fourth seed a third pool (so fleet rollouts span
// 3+ pools); a person deleting a machine (drained like any, so a blocked
// drain meets it); the owner undoing a change and applying it again
// later; platform bumps of the proxy defaults; a Cluster paused and
// resumed, as clusterctl move does (the controller restarts after);
// scale-downs; and fleet rollouts of three waves with a soak, stop
// conditions, maxConcurrent and either held-pool policy.
func randomWider(w *World, seed int64, start time.Time, length time.Duration) {
	r := rand.New(rand.NewSource(seed*104729 + 7))
	if seed%4 == 0 {
		w.AddPool(PoolSpec{Name: fmt.Sprintf("p%d", len(w.pools)), Replicas: int32(1 + r.Intn(4)), Edit: func(np *nodepoolv1.NodePool) {
			np.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Duration(r.Intn(30)) * time.Minute},
				FailurePolicy: []nodepoolv1.FailurePolicy{nodepoolv1.FailurePolicyHalt, nodepoolv1.FailurePolicyRollback}[r.Intn(2)]}
			np.Spec.Management.ManagementUpdates = []nodepoolv1.ManagementUpdatePolicy{nodepoolv1.ManagementUpdatesOnNextRollout, nodepoolv1.ManagementUpdatesNewNodes, nodepoolv1.ManagementUpdatesRollout}[r.Intn(3)]
			if r.Intn(3) == 0 {
				np.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
			}
		}})
	}
	for i := 0; i < 4; i++ {
		at := start.Add(time.Duration(r.Int63n(int64(length/time.Second))) * time.Second)
		p := w.pools[r.Intn(len(w.pools))]
		v := fmt.Sprintf("w%d", i)
		switch r.Intn(6) {
		case 0:
			pick := r.Intn(8)
			w.At(at, "a person deletes a machine of "+p.Name, func(*World) {
				if len(p.Machines) > 0 {
					p.DeleteMachine(p.Machines[pick%len(p.Machines)].Name)
				}
			})
		case 1:
			back := time.Duration(1+r.Intn(6)) * time.Hour
			var was, undone string
			w.At(at, "owner of "+p.Name+" undoes the config", func(*World) {
				was = p.Inputs.Config
				undone = fmt.Sprintf("u%d", i)
				if was != "c1" {
					undone = "c1"
				}
				p.Inputs.Config = undone
			})
			w.At(at.Add(back), "owner of "+p.Name+" applies the undone config again", func(*World) {
				if p.Inputs.Config == undone && was != "" {
					p.Inputs.Config = was
				}
			})
		case 2:
			w.At(at, "platform bumps the proxy defaults to "+v, func(w *World) {
				for _, q := range w.pools {
					q.Inputs.Platform[CompProxyDefaults] = v
				}
			})
		case 3:
			d := time.Duration(10+r.Intn(120)) * time.Minute
			w.At(at, "clusterctl move pauses "+p.Name+"'s Cluster for "+d.String(), func(*World) { p.ClusterPaused = true })
			w.At(at.Add(d), "the move ends: "+p.Name+"'s Cluster resumes on a new controller", func(w *World) {
				p.ClusterPaused = false
				w.Restart()
			})
		case 5:
			spec := nodepoolv1.FleetRolloutSpec{Action: nodepoolv1.FleetActionApplyPending,
				Waves:     []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("50%"), intstr.FromString("100%")},
				Soak:      &metav1.Duration{Duration: time.Duration(r.Intn(90)) * time.Minute},
				HeldPools: []nodepoolv1.HeldPoolPolicy{nodepoolv1.HeldPoolWait, nodepoolv1.HeldPoolSkip}[r.Intn(2)],
				StopOn:    nodepoolv1.FleetStopConditions{RolloutUnhealthy: ptr.To(r.Intn(3) > 0)},
			}
			if r.Intn(2) == 0 {
				spec.MaxConcurrent = ptr.To(int32(1 + r.Intn(2)))
			}
			if r.Intn(2) == 0 {
				spec.StopOn.MaxUnhealthyPools = ptr.To(int32(r.Intn(2)))
			}
			name := fmt.Sprintf("fw%d", i)
			w.At(at, "fleet rollout "+name+" with soak and stop conditions", func(w *World) {
				var names []string
				for _, q := range w.pools {
					names = append(names, q.Name)
				}
				w.AddFleet(name, spec, names...)
			})
		case 4:
			w.At(at, "owner scales "+p.Name+" down by one", func(*World) {
				if n := *p.Obj.Spec.Replicas; n > 1 {
					n--
					p.Obj.Spec.Replicas = &n
				}
			})
		}
	}
}

// randomDrains draws, from its own source (so the rest of a seed's world
// is the same with or without it), for every third seed: one pool's
// drain policy, and a spell during which a PodDisruptionBudget allows no
// eviction from its nodes; when it ends, a person resumes the pool (a
// drain halt holds until then).
func randomDrains(w *World, seed int64, start time.Time, length time.Duration) {
	if seed%3 != 0 {
		return
	}
	r := rand.New(rand.NewSource(seed*7919 + 17))
	p := w.pools[r.Intn(len(w.pools))]
	on := []nodepoolv1.DrainTimeoutPolicy{nodepoolv1.DrainWait, nodepoolv1.DrainForce, nodepoolv1.DrainHalt}[r.Intn(3)]
	timeout := time.Duration(10+r.Intn(50)) * time.Minute
	p.Obj.Spec.Management.Drain = &nodepoolv1.Drain{OnTimeout: on, Timeout: &metav1.Duration{Duration: timeout}}
	at := start.Add(time.Duration(r.Int63n(int64(length/2/time.Second))) * time.Second)
	spell := time.Duration(6+r.Intn(30)) * time.Hour // long enough to meet a rollout
	w.At(at, fmt.Sprintf("a PodDisruptionBudget allows no eviction from %s's nodes (drain onTimeout %s after %s)", p.Name, on, timeout), func(*World) {
		p.DrainBlocked = true
	})
	w.At(at.Add(spell), "the budget allows evictions from "+p.Name+"'s nodes again; a person resumes it", func(*World) {
		p.UnblockDrains()
		p.Resumed()
	})
}

// ApplyPending is what `kubectl nodepool rollout apply-pending` writes on
// a pool (with a reason: --outside-windows --reason).
func ApplyPending(p *Pool, reason string) {
	at := p.w.Now.UTC().Truncate(time.Second).Add(time.Second)
	p.setAnnotation(nodepoolv1.AnnotationApplyPending, at.Format(time.RFC3339))
	p.setAnnotation(nodepoolv1.AnnotationFleetRollout, "")
	p.track.person = at
	if reason != "" {
		p.setAnnotation(nodepoolv1.AnnotationOutsideWindowsAt, at.Format(time.RFC3339))
		p.setAnnotation(nodepoolv1.AnnotationOutsideWindowsReason, reason)
	}
}
