package sim_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// TestEachClusterSeesOnlyItsOwnNodes: two Clusters of one namespace, a
// machine each. Through a Cluster's <cluster>-kubeconfig Secret (what
// Cluster API's ClusterCache and nodepool's controller connect with),
// the Node list holds that Cluster's Node only, and the other Cluster's
// Node is not found by name: each Cluster is its own workload cluster, as
// in a real fleet, though every simulated Node lives on one API server.
func TestEachClusterSeesOnlyItsOwnNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := setup(t, simv1.SimMachineSpec{})
	c := env.Client
	if _, err := simtest.CreateCluster(ctx, c, ns, "c2"); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{} // cluster -> its Node
	for _, cl := range []string{"c1", "c2"} {
		boot, err := ps.CreateBoot(ctx, c, ns, cl, "pool-"+cl, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, simtest.MachineDeployment(ns, cl, "pool-"+cl, "workers", boot.UserData, 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		for _, cl := range []string{"c1", "c2"} {
			machines := &clusterv1.MachineList{}
			if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cl}); err != nil {
				t.Fatal(err)
			}
			if len(machines.Items) != 1 || !machines.Items[0].Status.NodeRef.IsDefined() {
				return false, fmt.Sprintf("Cluster %s: %d Machines, want 1 with a Node", cl, len(machines.Items))
			}
			nodes[cl] = machines.Items[0].Status.NodeRef.Name
		}
		return true, ""
	})

	clusters := sim.NewKubeconfigClusters(c)
	for cl, other := range map[string]string{"c1": "c2", "c2": "c1"} {
		wc, err := clusters.GetClient(ctx, client.ObjectKey{Namespace: ns, Name: cl})
		if err != nil {
			t.Fatal(err)
		}
		list := &corev1.NodeList{}
		if err := wc.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		if !slices.Contains(names, nodes[cl]) || slices.Contains(names, nodes[other]) {
			t.Errorf("Cluster %s sees Nodes %v: want its own %s, not Cluster %s's %s", cl, names, nodes[cl], other, nodes[other])
		}
		if err := wc.Get(ctx, client.ObjectKey{Name: nodes[other]}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			t.Errorf("Cluster %s reads Cluster %s's Node %s by name: %v, want not found", cl, other, nodes[other], err)
		}
	}
}
