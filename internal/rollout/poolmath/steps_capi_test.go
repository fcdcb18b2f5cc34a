package poolmath

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"
)

// capiFenceposts is what Cluster API's MachineDeployment controller
// resolves: its own functions on a RollingUpdate MachineDeployment.
func capiFenceposts(s, u intstr.IntOrString, desired int32) (int32, int32, error) {
	if _, _, err := mdutil.ResolveFenceposts(&s, &u, desired); err != nil {
		return 0, 0, err
	}
	md := clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Replicas: &desired,
		Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
			Type:          clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{MaxSurge: &s, MaxUnavailable: &u},
		}}}}
	return mdutil.MaxSurge(md), mdutil.MaxUnavailable(md), nil
}

func TestFencepostsAreClusterAPIs(t *testing.T) {
	var values []intstr.IntOrString
	for _, n := range []int32{0, 1, 2, 3, 5, 10} {
		values = append(values, intstr.FromInt32(n))
	}
	for _, p := range []string{"0%", "1%", "10%", "25%", "33%", "50%", "99%", "100%", "150%", "x%", "ten"} {
		values = append(values, intstr.FromString(p))
	}
	for _, s := range values {
		for _, u := range values {
			for desired := int32(0); desired <= 12; desired++ {
				gs, gu, gerr := Fenceposts(&s, &u, desired)
				ws, wu, werr := capiFenceposts(s, u, desired)
				at := fmt.Sprintf("surge %s, unavailable %s, %d replicas", s.String(), u.String(), desired)
				if (gerr != nil) != (werr != nil) {
					t.Fatalf("%s: error %v, Cluster API's %v", at, gerr, werr)
				}
				if gs != ws || gu != wu {
					t.Errorf("%s: %d/%d, Cluster API resolves %d/%d", at, gs, gu, ws, wu)
				}
			}
		}
	}
}
