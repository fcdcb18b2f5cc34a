package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kyaml "sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"

	"nodepool.dev/nodepool/test/harness"
)

// The core provider clusterctl records for Cluster API: its name and
// namespace as `clusterctl init` installs it.
const (
	ClusterAPIProvider  = config.ClusterAPIProviderName
	ClusterAPINamespace = "capi-system"
	// ClusterAPIUser is the ServiceAccount Cluster API's controllers run as
	// once `clusterctl init` installed them.
	ClusterAPIUser = harness.ClusterAPIUser
)

// Clusterctl is an offline clusterctl setup: a configuration file whose
// providers are local file:// repositories, and a kubeconfig of the
// management cluster.
type Clusterctl struct {
	// Config is clusterctl.yaml.
	Config string
	// Kubeconfig reaches the management cluster as an administrator.
	Kubeconfig string
	// ClusterAPIVersion is the pinned Cluster API module's version.
	ClusterAPIVersion string
}

// WriteClusterctl writes into dir, for clusterctl to read without a
// network: nodepool's add-on provider repository of the checkout root at
// version (hack/clusterctl, the files a release ships), Cluster API's core
// provider at the pinned version (its metadata.yaml, from the module), a
// clusterctl.yaml naming both with variables, and an administrator's
// kubeconfig of cfg.
func WriteClusterctl(root, dir, version, image string, cfg *rest.Config, variables map[string]string) (*Clusterctl, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m sigs.k8s.io/cluster-api: %w", err)
	}
	capiVersion, capiDir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || capiDir == "" {
		return nil, fmt.Errorf("go list -m sigs.k8s.io/cluster-api: %q", out)
	}
	gen := exec.Command("go", "run", "./hack/clusterctl", "--out", dir, "--version", version, "--image", image)
	gen.Dir = root
	if b, err := gen.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go run ./hack/clusterctl: %w\n%s", err, b)
	}
	core := filepath.Join(dir, ClusterAPIProvider, capiVersion)
	if err := os.MkdirAll(core, 0o755); err != nil {
		return nil, err
	}
	meta, err := os.ReadFile(filepath.Join(capiDir, "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(core, "metadata.yaml"), meta, 0o644); err != nil {
		return nil, err
	}
	conf := map[string]any{
		"providers": []map[string]string{
			{"name": "nodepool", "type": string(clusterctlv1.AddonProviderType), "url": "file://" + filepath.Join(dir, "addon-nodepool", version, "addon-components.yaml")},
			// Only its metadata.yaml is read: the core provider is already
			// installed (RecordClusterAPI).
			{"name": ClusterAPIProvider, "type": string(clusterctlv1.CoreProviderType), "url": "file://" + filepath.Join(core, "core-components.yaml")},
		},
	}
	for k, v := range variables {
		conf[k] = v
	}
	b, err := kyaml.Marshal(conf)
	if err != nil {
		return nil, err
	}
	c := &Clusterctl{Config: filepath.Join(dir, "clusterctl.yaml"), Kubeconfig: filepath.Join(dir, "kubeconfig"), ClusterAPIVersion: capiVersion}
	if err := os.WriteFile(c.Config, b, 0o600); err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["management"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["management"] = &clientcmdapi.Context{Cluster: "management", AuthInfo: "admin"}
	kc.CurrentContext = "management"
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return nil, err
	}
	return c, nil
}

// Client is clusterctl's client (what the clusterctl command runs) of the
// management cluster, with the configuration c.Config.
func (c *Clusterctl) Client(ctx context.Context) (clusterctlclient.Client, error) {
	cc, err := config.New(ctx, c.Config)
	if err != nil {
		return nil, err
	}
	return clusterctlclient.New(ctx, c.Config, clusterctlclient.InjectConfig(cc),
		clusterctlclient.InjectClusterClientFactory(func(in clusterctlclient.ClusterClientFactoryInput) (cluster.Client, error) {
			kc := cluster.Kubeconfig(in.Kubeconfig)
			return cluster.New(kc, cc, cluster.InjectYamlProcessor(in.Processor), cluster.InjectProxy(unversionedProxy{cluster.NewProxy(kc)})), nil
		}))
}

// Cluster is clusterctl's client of the management cluster itself.
func (c *Clusterctl) Cluster(ctx context.Context) (cluster.Client, error) {
	cc, err := config.New(ctx, c.Config)
	if err != nil {
		return nil, err
	}
	kc := cluster.Kubeconfig{Path: c.Kubeconfig}
	return cluster.New(kc, cc, cluster.InjectProxy(unversionedProxy{cluster.NewProxy(kc)})), nil
}

// unversionedProxy is clusterctl's proxy of the management cluster but for
// one check: the test control plane's kube-apiserver is built from source
// without version stamps and reports v0.0.0-master, which clusterctl's
// minimum Kubernetes version check takes for older than 1.20.
type unversionedProxy struct{ cluster.Proxy }

func (p unversionedProxy) ValidateKubernetesVersion() error {
	err := p.Proxy.ValidateKubernetesVersion()
	if err != nil && strings.Contains(err.Error(), "server version: v0.0.0-master") {
		return nil
	}
	return err
}

// RecordClusterAPI records in clusterctl's inventory the Cluster API core
// provider the test control plane runs (its CRDs installed, its
// controllers in-process), as `clusterctl init` does when it installs it:
// a later init adds only the providers it is asked for.
func (c *Clusterctl) RecordClusterAPI(ctx context.Context) error {
	cl, err := c.Cluster(ctx)
	if err != nil {
		return err
	}
	inv := cl.ProviderInventory()
	if err := inv.EnsureCustomResourceDefinitions(ctx); err != nil {
		return err
	}
	kc, err := cl.Proxy().NewClient(ctx)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ClusterAPINamespace}}
	if err := kc.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return inv.Create(ctx, clusterctlv1.Provider{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ClusterAPINamespace, Name: ClusterAPIProvider,
			Labels: map[string]string{clusterctlv1.ClusterctlLabel: "", clusterv1.ProviderNameLabel: ClusterAPIProvider},
		},
		ProviderName: ClusterAPIProvider,
		Type:         string(clusterctlv1.CoreProviderType),
		Version:      c.ClusterAPIVersion,
	})
}
