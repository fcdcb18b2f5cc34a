package admission

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/test/stack"
)

const (
	msDeletePolicy = "nodepool-owns-machinesets-deletion"

	garbageCollectorUser    = "system:serviceaccount:kube-system:generic-garbage-collector"
	namespaceControllerUser = "system:serviceaccount:kube-system:namespace-controller"
	controllerManagerUser   = "system:kube-controller-manager"
)

// TestThePoliciesRefuseDeletingAPoolsMachineSet: deleting a pool's
// MachineSet (Cluster API's, of the pool's MachineDeployment, or an InPlace
// pool's) replaces its machines with no record. An administrator's delete
// is refused, naming the action and `kubectl nodepool rollout restart`;
// Cluster API (which deletes old MachineSets), the controller, the garbage
// collector and the namespace controller (a pool's or a namespace's
// deletion cascades to them) delete them, and so does clusterctl move,
// which marks what it deletes from the source. A MachineSet that is not a
// pool's is none of the policy's business.
func TestThePoliciesRefuseDeletingAPoolsMachineSet(t *testing.T) {
	waitForPolicies(t)
	ctx := context.Background()
	admin := as(t, adminUser)
	for _, pick := range []struct {
		what string
		ms   func(*fixture) *clusterv1.MachineSet
	}{
		{"Cluster API's MachineSet of the pool's MachineDeployment", func(f *fixture) *clusterv1.MachineSet { return f.ms }},
		{"an InPlace pool's MachineSet", func(f *fixture) *clusterv1.MachineSet { return f.inPlace }},
	} {
		t.Run(pick.what, func(t *testing.T) {
			f := newFixture(t)
			ms := pick.ms(f)
			err := admin.Delete(ctx, ms)
			refused(t, "deleting "+ms.Name, err, msDeletePolicy, "deleting it replaces its machines with no record in the pool's history; replace them with `kubectl nodepool rollout restart workers -n "+f.pool.Namespace+"`")
			// The label removed first does not get past it: the policy
			// refuses that, and follows the owner too.
			if err := admin.Patch(ctx, ms, client.RawPatch(types.MergePatchType, []byte(removeLabel))); err == nil {
				t.Errorf("removing the label of %s: accepted", ms.Name)
			}
			for _, user := range []string{stack.ClusterAPIUser, controllerUser, garbageCollectorUser, namespaceControllerUser, controllerManagerUser} {
				f := newFixture(t)
				if err := as(t, user).Delete(ctx, pick.ms(f)); err != nil {
					t.Errorf("deleting %s as %s: %v, want accepted", pick.ms(f).Name, user, err)
				}
			}
			// clusterctl move marks each object it deletes from the source.
			f = newFixture(t)
			ms = pick.ms(f)
			mark := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/annotations","value":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}]`))
			if err := admin.Patch(ctx, ms, mark); err != nil {
				t.Errorf("clusterctl move's delete-for-move mark on %s: %v", ms.Name, err)
			} else if err := admin.Delete(ctx, ms); err != nil {
				t.Errorf("clusterctl move deleting %s: %v, want accepted", ms.Name, err)
			}
		})
	}
	t.Run("a MachineSet that is not a pool's", func(t *testing.T) {
		f := newFixture(t)
		other := machineSet(f.pool.Namespace, "other", map[string]string{clusterv1.ClusterNameLabel: "c1"})
		if err := env.Client.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, other); err != nil {
			t.Errorf("deleting a MachineSet that is not a pool's: %v, want accepted", err)
		}
	})
}
