package harness_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/test/harness"
	"nodepool.dev/nodepool/test/harness/testinfra"
)

var env *harness.Env

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	env, err = harness.Start(ctx, harness.Options{CRDs: testinfra.CRDs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err == nil {
		err = (&testinfra.MachineReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	env.Run(mgr)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

// TestMachineDeploymentRollsOnDataSecretNameChange proves the harness: the
// real Cluster API controllers turn a MachineDeployment of 3 into 3 Machines
// with nodeRefs, and a new dataSecretName replaces every one of them.
func TestMachineDeploymentRollsOnDataSecretNameChange(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := env.NewNamespace(t)
	if _, err := testinfra.CreateCluster(ctx, c, env.Config, ns, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := testinfra.CreateMachineTemplate(ctx, c, ns, "workers"); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{
		clusterv1.ClusterNameLabel:           "c1",
		clusterv1.MachineDeploymentNameLabel: "workers",
	}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](3),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: "c1",
					Version:     "v1.36.3",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("userdata-a")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: testinfra.Group, Kind: testinfra.KindMachineTemplate, Name: "workers",
					},
				},
			},
		},
	}
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	first := waitForMachines(t, ns, "userdata-a", 3, nil)

	if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	before := md.DeepCopy()
	md.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("userdata-b")
	if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitForMachines(t, ns, "userdata-b", 3, first)
}

// waitForMachines waits until the namespace holds exactly n Machines, all
// with a nodeRef to a Ready Node and the given dataSecretName, none of them
// in exclude, and returns their UIDs.
func waitForMachines(t *testing.T, ns, dataSecret string, n int, exclude sets.Set[string]) sets.Set[string] {
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
			if !m.Status.NodeRef.IsDefined() || ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != dataSecret || exclude.Has(string(m.UID)) {
				ok = false
				continue
			}
			node := &corev1.Node{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
				ok = false
			}
		}
		last = fmt.Sprintf("%d machines, want %d on %s", len(list.Items), n, dataSecret)
		if ok {
			return uids
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out: %s", last)
	return nil
}
