package scenario

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// daily2h is a window every day 12:00–14:00 UTC, with a health gate of a
// canary soaking 10m and every later machine 2m.
func daily2h(np *nodepoolv1.NodePool) {
	np.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
		{Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, TimeZone: "UTC"}}}
	np.Spec.Management.Health = health(1, 10*time.Minute, 2*time.Minute, nodepoolv1.FailurePolicyHalt)
}

// A pool that rolled 3 machines four times in 20m–29m (and had one
// rollout superseded 5 minutes in) and then grew to 30 is not told its
// next rollout fits the 2h window, as the old method (the slowest recent
// rollout, whatever its size) told it: the prediction scales the
// history's time per round by the rounds of 30 machines, and is within
// ±30% of what the simulated rollout then takes, with maxSurge 1 (30
// rounds, past the window) or 3 (11 rounds, inside it).
func TestAPoolGrownTenfoldIsNotToldItFits(t *testing.T) {
	for _, surge := range []int32{1, 3} {
		t.Run(fmt.Sprintf("maxSurge %d", surge), func(t *testing.T) {
			w := New(t0)
			p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: daily2h})
			// Machines boot in 2m to 5m: the history has a spread.
			for i, c := range []string{"c2", "c3", "c4", "c5"} {
				c, boot := c, []time.Duration{2 * time.Minute, 5 * time.Minute, 3 * time.Minute, 4 * time.Minute}[i]
				w.At(t0.Add(time.Duration(30*i+31)*time.Minute), fmt.Sprintf("owner edits the config to %s (machines boot in %s)", c, boot), func(w *World) {
					p.Inputs.Config, w.BootDelay = c, boot
				})
			}
			w.At(t0.Add(151*time.Minute), "owner edits the config to c6", func(*World) { p.Inputs.Config = "c6" })
			w.At(t0.Add(156*time.Minute), "owner edits the config to c7 mid-rollout", func(*World) { p.Inputs.Config = "c7" })
			run(t, w, 3*time.Hour+30*time.Minute)
			var slowest time.Duration // the old method: the slowest completed rollout, whatever its size
			for _, r := range p.History[1:] {
				if r.Outcome == OutcomeComplete {
					slowest = max(slowest, r.Completed.Sub(r.Started))
				}
			}
			if n := len(p.History); n != 7 || p.History[5].Outcome != OutcomeSuperseded || p.History[6].Outcome != OutcomeComplete {
				t.Fatalf("history %+v, want 4 small rollouts, one superseded, one complete\n%s", p.History, w.Trace())
			}
			w.After(time.Minute, "owner scales to 30", func(*World) {
				p.Obj.Spec.Replicas = ptrInt(30)
				p.Obj.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(surge))
			})
			w.At(time.Date(2026, 12, 1, 11, 59, 0, 0, time.UTC), "read the prediction", func(*World) {})
			run(t, w, time.Date(2026, 12, 1, 11, 59, 0, 0, time.UTC).Sub(w.Now))
			msg := p.Condition(nodepoolv1.ConditionMaintenanceWindow).Message
			in := p.Observe()
			shape, ok := poolmath.ShapeOf(&in.Pool.Spec, 30, 30)
			if !ok {
				t.Fatal("no shape for 30 machines")
			}
			pred := poolmath.Predict(shape, in.RecentRollouts)

			w.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "owner edits the config to c8 (machines boot in 4m)", func(w *World) {
				p.Inputs.Config, w.BootDelay = "c8", 4*time.Minute
			})
			run(t, w, 6*time.Hour)
			last := lastRecord(p)
			if last.Outcome != OutcomeComplete || last.Completed == nil {
				t.Fatalf("the 30-machine rollout is %s\n%s", last.Outcome, w.Trace())
			}
			took := last.Completed.Sub(last.Started)
			t.Logf("old method: slowest %s; predicted %s (%s–%s); took %s; message: %s", slowest, pred.Likely, pred.Low, pred.High, took, msg)
			if pred.FromSettings || pred.Samples != 5 || pred.Shape.Rounds != poolmath.Steps(29, surge, 0)+1 {
				t.Errorf("prediction %+v, want from the 5 completed rollouts of history, for 1+29/maxSurge rounds", pred)
			}
			if diff := pred.Likely - took; diff < -took*3/10 || diff > took*3/10 {
				t.Errorf("predicted %s, the rollout took %s: more than 30%% off", pred.Likely, took)
			}
			if took < pred.Low || took > pred.High {
				t.Errorf("the rollout took %s, outside the predicted spread %s–%s", took, pred.Low, pred.High)
			}
			if took <= 2*time.Hour {
				if !strings.Contains(msg, "fits the 2h0m0s of the window") || strings.Contains(msg, "does not fit") {
					t.Errorf("before a rollout that took %s, the MaintenanceWindow message says: %s", took, msg)
				}
				return
			}
			if slowest > 2*time.Hour {
				t.Errorf("the old method's slowest rollout took %s: it would not have said it fits", slowest)
			}
			if strings.Contains(msg, "one fits") || !strings.Contains(msg, "does not fit the 2h0m0s of the window") {
				t.Errorf("before a rollout that took %s, the MaintenanceWindow message says: %s", took, msg)
			}
		})
	}
}

// With a single rollout of history the prediction uses the declared
// settings only, and errs long: it says so, and does not say it fits.
func TestAShortHistoryPredictsFromTheDeclaredSettings(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3, Edit: daily2h})
	w.At(t0.Add(31*time.Minute), "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.At(t0.Add(time.Hour), "owner scales to 30", func(*World) { p.Obj.Spec.Replicas = ptrInt(30) })
	run(t, w, 23*time.Hour+59*time.Minute-30*time.Minute)
	msg := p.Condition(nodepoolv1.ConditionMaintenanceWindow).Message
	in := p.Observe()
	shape, _ := poolmath.ShapeOf(&in.Pool.Spec, 30, 30)
	pred := poolmath.Predict(shape, in.RecentRollouts)
	w.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "owner edits the config to c3", func(*World) { p.Inputs.Config = "c3" })
	run(t, w, 6*time.Hour)
	last := lastRecord(p)
	if last.Outcome != OutcomeComplete {
		t.Fatalf("the 30-machine rollout is %s\n%s", last.Outcome, w.Trace())
	}
	took := last.Completed.Sub(last.Started)
	if !pred.FromSettings || pred.Likely < took {
		t.Errorf("prediction %+v, want from the settings and no shorter than the %s the rollout took", pred, took)
	}
	if !strings.Contains(msg, "by the declared settings") || !strings.Contains(msg, "only 1 of this pool's rollouts to go by, fewer than 3") ||
		!strings.Contains(msg, "does not fit the 2h0m0s of the window") {
		t.Errorf("MaintenanceWindow message: %s", msg)
	}
}
