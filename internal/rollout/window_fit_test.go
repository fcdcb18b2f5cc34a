package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// The record of a rollout that starts says what it sets out to do, so its
// duration predicts rollouts of another size: machines, rounds, soaks.
func TestARolloutRecordSaysItsMachinesRoundsAndSoaks(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	w.Pool.Spec.Release.Version = "v1.36.4"
	w.Pool.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)),
		CanarySoak: &metav1.Duration{Duration: 10 * time.Minute}, Soak: &metav1.Duration{Duration: 2 * time.Minute}}
	in = relatest(t, in, w)
	p := Decide(in)
	if r := p.Record; r == nil || r.Machines != 3 || r.Rounds != 2 || r.Soak != 12*time.Minute {
		t.Errorf("record %+v, want 3 machines in 2 rounds (the canary, then 2) with 12m of soaks", r)
	}

	// A forced rollout replaces the machines created before its time.
	w = inputstest.New()
	in = settled(t, w)
	in.MachineDeployment.MachinesCreated = []time.Time{t0.Add(-time.Hour), t0.Add(-time.Hour), t0.Add(time.Second)}
	past := metav1.NewTime(t0.Add(-time.Minute))
	in.Pool.Spec.Management.RolloutAfter = &past
	p = Decide(in)
	if r := p.Record; r == nil || r.ForcedAt == nil || r.Machines != 2 || r.Rounds != 2 || r.Soak != 0 {
		t.Errorf("forced record %+v, want the 2 machines from before it in 2 rounds", r)
	}

	// An OnDelete pool's rounds are a person's: nothing is recorded.
	w = inputstest.New()
	in = settled(t, w)
	w.Pool.Spec.Release.Version = "v1.36.4"
	w.Pool.Spec.Management.Replace.Strategy = nodepoolv1.ReplaceStrategyOnDelete
	in = relatest(t, in, w)
	if r := Decide(in).Record; r == nil || r.Machines != 0 || r.Rounds != 0 {
		t.Errorf("OnDelete record %+v, want no machines or rounds", r)
	}
}
