package harness_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/harness"
)

var (
	env *harness.Env
	ps  *simtest.PayloadServer
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	var err error
	env, err = harness.Start(ctx, harness.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: sim.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err == nil {
		err = sim.SetupWithManager(env.Context(), mgr, sim.Options{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.Run(mgr)
	dir, err := os.MkdirTemp("", "harness-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if ps, err = simtest.StartPayloadServer(env.Context(), env.Config, dir, ctrl.Log.WithName("payload-server")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// TestMachineDeploymentRollsOnDataSecretNameChange proves the harness: the
// real Cluster API controllers turn a MachineDeployment of 3 over the sim
// provider into 3 Machines with nodeRefs (each machine fetching its payload
// from the real payload server), and a new dataSecretName replaces every
// one of them.
func TestMachineDeploymentRollsOnDataSecretNameChange(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := env.NewNamespace(t)
	if _, err := simtest.CreateCluster(ctx, c, ns, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := simtest.CreateMachineTemplate(ctx, c, ns, "workers", simv1.SimMachineSpec{}); err != nil {
		t.Fatal(err)
	}
	a, err := ps.CreateBoot(ctx, c, ns, "c1", "workers", "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ps.CreateBoot(ctx, c, ns, "c1", "workers", "b")
	if err != nil {
		t.Fatal(err)
	}
	md := simtest.MachineDeployment(ns, "c1", "workers", "workers", a.UserData, 3)
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	first := waitForMachines(t, ns, a, 3, nil)

	if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	before := md.DeepCopy()
	md.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(b.UserData)
	if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitForMachines(t, ns, b, 3, first)
}

// waitForMachines waits until the namespace holds exactly n Machines, all
// booted from boot's user-data with a nodeRef to a Node carrying boot's
// payload labels, none of them in exclude, and returns their UIDs.
func waitForMachines(t *testing.T, ns string, boot *simtest.Boot, n int, exclude sets.Set[string]) sets.Set[string] {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		list := &clusterv1.MachineList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		uids := sets.New[string]()
		ok := len(list.Items) == n
		for _, m := range list.Items {
			uids.Insert(string(m.UID))
			if !m.Status.NodeRef.IsDefined() || ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != boot.UserData || exclude.Has(string(m.UID)) {
				ok = false
				continue
			}
			node := &corev1.Node{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
				ok = false
				continue
			}
			for k, v := range boot.NodeLabels() {
				if node.Labels[k] != v {
					ok = false
				}
			}
		}
		last = fmt.Sprintf("%d machines, want %d on %s", len(list.Items), n, boot.UserData)
		if ok {
			return uids
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out: %s", last)
	return nil
}
