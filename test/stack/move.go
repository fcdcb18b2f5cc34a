package stack

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// Two management clusters, for clusterctl move: StartTarget starts a
// second whole stack whose sim provider's workload clusters are where the
// first one's are (a move moves management, never the workload clusters
// and their Nodes), and InstallClusterctlInventory makes a stack look
// installed to clusterctl, as clusterctl init leaves a management cluster.

// StartTarget starts a stack to move management to, whose machines
// register their Nodes on the API server workload reaches (the source's).
func StartTarget(ctx context.Context, workload *rest.Config) (*Stack, error) {
	return start(ctx, workload)
}

// Providers are the clusterctl inventory entries a stack carries: the
// Cluster API core, the sim infrastructure provider (its control plane is
// in the same module and version) and nodepool as an add-on provider.
var Providers = []clusterctlv1.Provider{
	{ObjectMeta: metav1.ObjectMeta{Namespace: ClusterAPINamespace, Name: ClusterAPIProvider}, ProviderName: ClusterAPIProvider, Type: string(clusterctlv1.CoreProviderType), Version: "v1.14.2"},
	{ObjectMeta: metav1.ObjectMeta{Namespace: "sim-system", Name: "infrastructure-sim"}, ProviderName: "sim", Type: string(clusterctlv1.InfrastructureProviderType), Version: "v0.1.0"},
	{ObjectMeta: metav1.ObjectMeta{Namespace: ManagementNamespace, Name: "addon-nodepool"}, ProviderName: "nodepool", Type: string(clusterctlv1.AddonProviderType), Version: "v0.1.0"},
}

// InstallClusterctlInventory does what clusterctl init does besides
// installing the components, which the stack runs already: the
// clusterctl.cluster.x-k8s.io label on every provider CRD (clusterctl move
// discovers the kinds of the CRDs carrying it; nodepool's and the sim's
// carry it as shipped), the inventory CRD and one Provider per provider,
// with clusterctl's own inventory client. kubeconfig reaches the stack.
func (s *Stack) InstallClusterctlInventory(ctx context.Context, kubeconfig string) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(s.Env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return err
	}
	groups := []string{clusterv1.GroupVersion.Group, nodepoolv1.GroupVersion.Group, simv1.GroupVersion.Group}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if !providerGroup(crd.Spec.Group, groups) {
			continue
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; ok {
			continue
		}
		before := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		if err := c.Patch(ctx, crd, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("labelling CRD %s for clusterctl: %w", crd.Name, err)
		}
	}
	cfg, err := clusterctlconfig.New(ctx, "")
	if err != nil {
		return fmt.Errorf("clusterctl configuration: %w", err)
	}
	inventory := ClusterctlCluster(clusterctlcluster.Kubeconfig{Path: kubeconfig}, cfg).ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD: %w", err)
	}
	for _, p := range Providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the namespace of provider %s: %w", p.Name, err)
		}
		if err := inventory.Create(ctx, p); err != nil {
			return fmt.Errorf("creating the inventory entry of %s: %w", p.Name, err)
		}
	}
	return nil
}

// ClusterctlCluster is clusterctl's client of the management cluster
// kubeconfig reaches, all of clusterctl's own code but for its minimum
// Kubernetes version check, which the test kube-apiserver's unstamped
// version fails (unversionedProxy, clusterctl.go). clusterctl's Client
// takes it with ClusterctlClientFactory.
func ClusterctlCluster(kubeconfig clusterctlcluster.Kubeconfig, cfg clusterctlconfig.Client) clusterctlcluster.Client {
	return clusterctlcluster.New(kubeconfig, cfg, clusterctlcluster.InjectProxy(unversionedProxy{clusterctlcluster.NewProxy(kubeconfig)}))
}

// ClusterctlClientFactory is ClusterctlCluster as the factory of
// clusterctl's Client (clusterctl/client.InjectClusterClientFactory).
func ClusterctlClientFactory(cfg clusterctlconfig.Client) clusterctlclient.ClusterClientFactory {
	return func(in clusterctlclient.ClusterClientFactoryInput) (clusterctlcluster.Client, error) {
		return ClusterctlCluster(clusterctlcluster.Kubeconfig(in.Kubeconfig), cfg), nil
	}
}

// providerGroup reports whether group is one of groups or under one
// (bootstrap.cluster.x-k8s.io is under cluster.x-k8s.io).
func providerGroup(group string, groups []string) bool {
	for _, g := range groups {
		if group == g || strings.HasSuffix(group, "."+g) {
			return true
		}
	}
	return false
}
