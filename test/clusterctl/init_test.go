package clusterctl

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

// TestClusterctlInitInstallsTheAddOnThatReconcilesAPool: `clusterctl init
// --addon nodepool` from the local repository records nodepool in
// clusterctl's inventory as an add-on provider, applies its components
// with clusterctl's labels in the namespace NODEPOOL_NAMESPACE names (and
// nowhere else) running the provider's image; the controller and
// payload server it applied come up as their ServiceAccounts and reconcile
// a pool whose machines boot from the payload server.
func TestClusterctlInitInstallsTheAddOnThatReconcilesAPool(t *testing.T) {
	install(t)
	ctx := context.Background()

	cl, err := ctl.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := cl.ProviderInventory().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range inv.Items {
		found = found || (p.ProviderName == "nodepool" && p.Type == string(clusterctlv1.AddonProviderType) && p.Version == providerVersion && p.Namespace == systemNamespace)
	}
	if !found {
		t.Errorf("clusterctl's inventory holds no add-on provider nodepool %s in %s: %+v", providerVersion, systemNamespace, inv.Items)
	}

	for _, name := range []string{controllerName, payloadName} {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: name}, d); err != nil {
			t.Fatal(err)
		}
		if _, ok := d.Labels[clusterctlv1.ClusterctlLabel]; !ok || d.Labels[clusterv1.ProviderNameLabel] != "addon-nodepool" {
			t.Errorf("deployment %s: labels %v lack clusterctl's", name, d.Labels)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("deployment %s runs %s, not the provider's image %s", name, got, image)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "nodepool-system"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace nodepool-system: %v, want none (NODEPOOL_NAMESPACE is %s)", err, systemNamespace)
	}

	p := newPool(t, 2)
	waitFor(t, p, "2 ready machines that fetched their payload", func(s state) bool {
		return s.settled(2) && reachedPayloadServer(s) && s.history == 1
	})
}
