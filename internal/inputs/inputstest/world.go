// Package inputstest builds a complete, valid world of objects for one
// NodePool (ConfigMaps, Secrets, Cluster, management config, template and
// its CRD) and gathers its inputs through the controller-runtime fake client.
package inputstest

import (
	"context"
	_ "embed"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
)

// Namespace of the pool and its objects.
const Namespace = "team-a"

var (
	//go:embed payload-server-ca.pem
	PayloadServerCA []byte
	//go:embed trust-bundle.pem
	TrustBundlePEM string
)

// ChronyConfig is an Ignition document (YAML).
const ChronyConfig = `# chrony for the corporate time servers
ignition:
  version: 3.4.0
storage:
  files:
    - path: /etc/chrony.conf
      mode: 0644
      overwrite: true
      contents:
        source: "data:,server%20time.corp.example%20iburst%0A"
systemd:
  units:
    - name: chronyd.service
      enabled: true
`

// TuningConfig is a MachineConfig and an Ignition document (JSON).
const TuningConfig = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-tuning
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  kernelArguments: [nosmt, "hugepages=16"]
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
        - path: /etc/sysctl.d/90-tuning.conf
          mode: 420
          contents: {source: "data:,vm.max_map_count%3D262144%0A"}
---
{"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHZyb3VwIHRlc3Qga2V5IGZvciBub2RlcG9vbA test"]}]}}
`

// World is every object one NodePool's payload is made from. Change a
// field, then call Gather.
type World struct {
	Pool        *nodepoolv1.NodePool
	UserConfigs []*corev1.ConfigMap
	PullSecret  *corev1.Secret
	TrustBundle *corev1.ConfigMap
	Cluster     *clusterv1.Cluster
	Management  *corev1.ConfigMap
	CRD         *apiextensionsv1.CustomResourceDefinition
	Template    *unstructured.Unstructured
	Settings    inputs.Settings
	// Extra objects the client holds besides the inputs (clones, say).
	Extra []client.Object
}

// New returns a world in which every input of a payload is set.
func New() *World {
	return &World{
		Pool: &nodepoolv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: Namespace},
			Spec: nodepoolv1.NodePoolSpec{
				ClusterName:              "prod-1",
				Replicas:                 ptr.To[int32](3),
				Release:                  nodepoolv1.Release{Version: "v1.36.3", Image: "registry.example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
				Config:                   []nodepoolv1.LocalObjectReference{{Name: "chrony"}, {Name: "tuning"}},
				PullSecretRef:            &nodepoolv1.LocalObjectReference{Name: "pull-secret"},
				AdditionalTrustBundleRef: &nodepoolv1.LocalObjectReference{Name: "corp-ca"},
				Proxy: &nodepoolv1.Proxy{
					HTTPProxy:  "http://proxy.corp.example:3128",
					HTTPSProxy: "http://proxy.corp.example:3128",
					NoProxy:    []string{".corp.example", "10.0.0.0/8"},
				},
				RegistryMirrors: []nodepoolv1.RegistryMirror{
					{Source: "quay.io/org", Mirrors: []string{"mirror.corp.example/org"}},
					{Source: "docker.io", Mirrors: []string{"mirror.corp.example/dockerhub", "mirror2.corp.example/dockerhub"}},
				},
				InfrastructureTemplateRef: nodepoolv1.TemplateReference{APIGroup: "infrastructure.sim.nodepool.dev", Kind: "SimMachineTemplate", Name: "small"},
				NodeLabels:                map[string]nodepoolv1.LabelValue{"example.com/role": "worker"},
				Taints:                    []nodepoolv1.Taint{{Key: "example.com/dedicated", Value: "batch", Effect: "NoSchedule"}},
			},
		},
		UserConfigs: []*corev1.ConfigMap{
			configMap("chrony", map[string]string{inputs.ConfigKey: ChronyConfig}),
			configMap("tuning", map[string]string{inputs.ConfigKey: TuningConfig}),
		},
		PullSecret: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "pull-secret", Namespace: Namespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}`)},
		},
		TrustBundle: configMap("corp-ca", map[string]string{inputs.TrustBundleKey: TrustBundlePEM}),
		Cluster: &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "prod-1", Namespace: Namespace},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork: clusterv1.ClusterNetwork{
					Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/14"}},
					Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"172.30.0.0/16"}},
				},
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "api.prod-1.example", Port: 6443},
			},
		},
		Management: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: inputs.DefaultManagementConfig.Name, Namespace: inputs.DefaultManagementConfig.Namespace},
			Data: map[string]string{inputs.ManagementConfigKey: `apiServerProxyImage: registry.example/haproxy@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
registryOverrides:
  - {source: quay.io/openshift, mirror: mirror.platform.example/openshift}
noProxy: [.platform.example]
`},
		},
		CRD: &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "simmachinetemplates.infrastructure.sim.nodepool.dev",
				Labels: map[string]string{clusterv1.GroupVersion.String(): "v1alpha1"},
			},
		},
		Template: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "infrastructure.sim.nodepool.dev/v1alpha1",
			"kind":       "SimMachineTemplate",
			"metadata":   map[string]any{"name": "small", "namespace": Namespace},
			"spec":       map[string]any{"template": map[string]any{"spec": map[string]any{"cpus": int64(2), "memory": "4Gi"}}},
		}},
		Settings: inputs.Settings{
			PayloadServerURL: "https://payload.nodepool-system.example:8443/ignition",
			PayloadServerCA:  PayloadServerCA,
			RendererVersion:  "v0.1.0",
		},
	}
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Data: data}
}

// ConfigMap returns a user config ConfigMap holding config.
func ConfigMap(name, config string) *corev1.ConfigMap {
	return configMap(name, map[string]string{inputs.ConfigKey: config})
}

// Scheme has every type a world holds except the template (unstructured).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, apiextensionsv1.AddToScheme, nodepoolv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Client returns a fake client holding the world's objects (nil ones left out).
func (w *World) Client() client.Reader {
	var objs []client.Object
	add := func(o client.Object, present bool) {
		if present {
			objs = append(objs, o.DeepCopyObject().(client.Object))
		}
	}
	add(w.Pool, w.Pool != nil)
	for _, cm := range w.UserConfigs {
		add(cm, cm != nil)
	}
	add(w.PullSecret, w.PullSecret != nil)
	add(w.TrustBundle, w.TrustBundle != nil)
	add(w.Cluster, w.Cluster != nil)
	add(w.Management, w.Management != nil)
	add(w.CRD, w.CRD != nil)
	add(w.Template, w.Template != nil)
	for _, o := range w.Extra {
		add(o, true)
	}
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
}

// Gather gathers the world's inputs.
func (w *World) Gather(ctx context.Context) (*inputs.Inputs, error) {
	return gather.Gather(ctx, w.Client(), w.Pool, w.Settings)
}

// MustGather gathers the world's inputs and fails the test on error.
func (w *World) MustGather(tb testing.TB) *inputs.Inputs {
	tb.Helper()
	in, err := w.Gather(context.Background())
	if err != nil {
		tb.Fatalf("Gather: %v", err)
	}
	return in
}

// Key is the namespaced name of an object of the pool's namespace.
func Key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: Namespace, Name: name}
}
