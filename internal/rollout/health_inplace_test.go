package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestInPlaceTheNextNodeWaitsForTheUpdatedOneToSoakAndAnUnhealthyOneHalts(t *testing.T) {
	old := &UserData{Name: "workers-old", RolloutHash: "old", Version: "v1", PayloadHash: "p-old", Created: t0.Add(-24 * time.Hour)}
	next := &UserData{Name: "workers-new", RolloutHash: "new", Version: "v1", PayloadHash: "p-new", Created: t0.Add(-time.Minute)}
	pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](3), Management: nodepoolv1.Management{
		UpgradeType: nodepoolv1.UpgradeTypeInPlace, Health: &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Second}}}}}
	machines := []InPlaceMachine{
		{Machine: "a", Node: "a", DataSecretName: next.Name, Version: "v1", UpdatedAt: t0.Add(-10 * time.Second)},
		{Machine: "b", Node: "b", DataSecretName: old.Name, Version: "v1", UpdatedAt: t0.Add(-time.Hour)},
		{Machine: "c", Node: "c", DataSecretName: old.Name, Version: "v1", UpdatedAt: t0.Add(-time.Hour)},
	}
	health := []MachineHealth{{Name: "a", Node: "a", Healthy: true, HealthySince: t0.Add(-time.Hour)},
		{Name: "b", Node: "b", Healthy: true, HealthySince: t0.Add(-time.Hour)}, {Name: "c", Node: "c", Healthy: true, HealthySince: t0.Add(-time.Hour)}}
	in := Input{Pool: pool, Now: t0, InPlace: &InPlace{Machines: machines, MaxUnavailable: 1}, Machines: health,
		UserData: map[string]UserData{old.Name: *old, next.Name: *next}}
	d := Decision{Target: next, Running: old, Replicas: 3, InProgress: true}
	h := decideInPlaceHealth(in, d, old)
	if h.Phase != HealthCanary || len(h.Soaking) != 1 {
		t.Fatalf("phase %s soaking %v, want Canary with a soaking", h.Phase, h.Soaking)
	}
	p := Plan{Decision: d}
	p.Decision.Health = h
	planInPlace(in, next, &p)
	if len(p.NodeActions) != 0 {
		t.Errorf("node actions %+v while node a soaks, want none", p.NodeActions)
	}
	in.Machines[0].Healthy, in.Machines[0].Signal = false, "Ready=False"
	h = decideInPlaceHealth(in, d, old)
	if h.Phase != HealthHalted || h.Machine != "a" {
		t.Errorf("phase %s machine %q, want Halted on a", h.Phase, h.Machine)
	}
	in.Pool.Spec.Management.Health.FailurePolicy = nodepoolv1.FailurePolicyRollback
	if h = decideInPlaceHealth(in, d, old); h.RollbackTo != old.Name {
		t.Errorf("rollback to %q, want %s", h.RollbackTo, old.Name)
	}
}
