package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// TestAMachineWithoutItsStatusIsAdoptedFromItsNodeAndNeverBootsTwice: a
// SimMachine with a providerID and no status (as clusterctl move creates
// it on the target) takes what it booted from its Node, and does not run
// a payload again.
func TestAMachineWithoutItsStatusIsAdoptedFromItsNodeAndNeverBootsTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	a, _ := twoBoots(t, ns, "workers")
	if err := env.Client.Create(ctx, simtest.MachineDeployment(ns, "c1", "workers", "workers", a.UserData, 1)); err != nil {
		t.Fatal(err)
	}
	running(t, ns, "workers", 1, a, nil)
	_, sm := simMachine(t, ns, "workers")
	nodes := simNodes(t, ns)
	if sm == nil || len(nodes) != 1 || sm.Status.BootedPayload != a.Payload.Hash {
		t.Fatalf("one booted machine with its Node expected: %v, %d nodes", sm, len(nodes))
	}
	// Had the machine booted again, it would report the payload its
	// user-data serves; adopted, it reports what its Node says it booted.
	node := &nodes[0]
	marker := strings.Repeat("d", 64)
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, nodepoolv1.AnnotationBootedPayload, marker)))
	if err := env.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
	// What a move leaves: the object, without its status.
	if err := env.Client.Status().Patch(ctx, sm, client.RawPatch(types.MergePatchType, []byte(`{"status":null}`))); err != nil {
		t.Fatal(err)
	}
	annotate(t, sm, "test.nodepool.dev/moved", "true") // a metadata change wakes the provider
	eventually(t, time.Minute, func() (bool, string) {
		got := &simv1.SimMachine{}
		get(t, got, ns, sm.Name)
		return got.Status.BootedPayload == marker && ptr.Deref(got.Status.Initialization.Provisioned, false) && got.Status.NodeName == node.Name,
			fmt.Sprintf("SimMachine status %+v", got.Status)
	})
	after := &corev1.Node{}
	if !get(t, after, "", node.Name) || after.UID != node.UID {
		t.Errorf("the Node was registered again: %s before, %s after", node.UID, after.UID)
	}
}
