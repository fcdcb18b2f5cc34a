package devenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// What every dev environment has, ready for a NodePool (config/samples).
const (
	devNamespace = "dev"
	devCluster   = "dev"
	devTemplate  = "small"
)

// DefaultAPIServerProxyImage is the API-server proxy image of a new dev
// environment's management config.
var DefaultAPIServerProxyImage = ProxyImage("v1")

// ProxyImage is a made-up API-server proxy image whose digest is derived
// from tag, so a demo can bump it.
func ProxyImage(tag string) string {
	sum := sha256.Sum256([]byte("nodepool dev haproxy " + tag))
	return "registry.example/haproxy@sha256:" + hex.EncodeToString(sum[:])
}

// seed creates what is missing of the management config and the dev
// namespace's Cluster (with its SimControlPlane, whose controller writes
// the <cluster>-kubeconfig Secret) and SimMachineTemplate. Existing objects
// are left as they are: a resumed environment keeps its changes.
func (e *env) seed(ctx context.Context) error {
	c := e.client
	mc := inputs.DefaultManagementConfig
	for _, ns := range []string{mc.Namespace, devNamespace} {
		if err := createIfMissing(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := createIfMissing(ctx, c, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name},
		Data:       map[string]string{inputs.ManagementConfigKey: "apiServerProxyImage: " + e.opts.APIServerProxyImage + "\n"},
	}); err != nil {
		return err
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: devNamespace, Name: devCluster}, &clusterv1.Cluster{})
	if apierrors.IsNotFound(err) {
		// A first run stopped between the two creations leaves the control
		// plane alone; make both afresh.
		cp := &simv1.SimControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: devCluster}}
		if err := c.Delete(ctx, cp); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the SimControlPlane %s/%s left by an interrupted first run: %w", devNamespace, devCluster, err)
		}
		_, err = simtest.CreateCluster(ctx, c, devNamespace, devCluster)
	}
	if err != nil {
		return fmt.Errorf("making the Cluster %s/%s: %w", devNamespace, devCluster, err)
	}
	err = simtest.CreateMachineTemplate(ctx, c, devNamespace, devTemplate, simv1.SimMachineSpec{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func createIfMissing(ctx context.Context, c client.Client, o client.Object) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", o, client.ObjectKeyFromObject(o), err)
	}
	return nil
}

// clusterReady says whether the dev Cluster's control plane is initialised
// (its kubeconfig Secret exists).
func (e *env) clusterReady(ctx context.Context) bool {
	cp := &simv1.SimControlPlane{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: devNamespace, Name: devCluster}, cp); err != nil {
		return false
	}
	return ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false)
}

// inventory counts what a resumed environment holds.
func (e *env) inventory(ctx context.Context) string {
	pools := &nodepoolv1.NodePoolList{}
	machines := &clusterv1.MachineList{}
	if e.client.List(ctx, pools) != nil || e.client.List(ctx, machines) != nil {
		return "cannot count the pools"
	}
	return fmt.Sprintf("%s, %s", plural(len(pools.Items), "NodePool"), plural(len(machines.Items), "Machine"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
