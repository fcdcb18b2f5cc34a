package gather_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

func TestGatherReadsEveryInput(t *testing.T) {
	in := inputstest.New().MustGather(t)

	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", what, got, want)
		}
	}
	check("pool", in.Pool, inputstest.Key("workers"))
	check("release", in.Release.Version, "v1.36.3")
	check("user config documents", len(in.UserConfigs.Documents), 3)
	check("kernel arguments", len(in.UserConfigs.Config.KernelArguments.ShouldExist), 2)
	check("pull secret ref", in.PullSecretRef, "pull-secret")
	check("pull secret", strings.Contains(string(in.PullSecret), "registry.example"), true)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, in); strings.Contains(s, "dXNlcjpwYXNz") || strings.Contains(s, "auths") {
			t.Errorf("%s of the inputs prints the pull secret", format)
		}
	}
	check("trust bundle ref", in.TrustBundleRef, "corp-ca")
	check("trust bundle", in.TrustBundle, inputstest.TrustBundlePEM)
	check("noProxy sorted", in.Proxy.NoProxy, []string{".corp.example", "10.0.0.0/8"})
	check("mirrors sorted", in.RegistryMirrors[0].Source, "docker.io")
	check("pod CIDRs", in.Cluster.PodCIDRs, []string{"10.128.0.0/14"})
	check("service CIDRs", in.Cluster.ServiceCIDRs, []string{"172.30.0.0/16"})
	check("service domain default", in.Cluster.ServiceDomain, "cluster.local")
	check("endpoint", in.Cluster.Endpoint, inputs.Endpoint{Host: "api.prod-1.example", Port: 6443})
	check("API-server proxy image", strings.HasPrefix(in.Management.APIServerProxyImage, "registry.example/haproxy@"), true)
	check("metadata address default", in.Management.MetadataAddress, "169.254.169.254")
	check("payload server", in.PayloadServer.URL, "https://payload.nodepool-system.example:8443/ignition")
	check("renderer", in.RendererVersion, "v0.1.0")
	check("template", in.InfrastructureTemplate.Kind, "SimMachineTemplate")
	check("template spec", string(in.InfrastructureTemplate.Spec), `{"template":{"spec":{"cpus":2,"memory":"4Gi"}}}`)
	var sources []string
	for _, s := range in.Sources {
		sources = append(sources, s.Kind+"/"+s.Name)
		if !strings.HasPrefix(s.Digest, "sha256:") {
			t.Errorf("source %s digest %q", s.Name, s.Digest)
		}
	}
	check("sources", sources, []string{"ConfigMap/chrony", "ConfigMap/corp-ca", "ConfigMap/tuning", "Secret/pull-secret"})
}

func TestGatherWithoutOptionalInputs(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Config, w.Pool.Spec.PullSecretRef, w.Pool.Spec.AdditionalTrustBundleRef = nil, nil, nil
	w.Pool.Spec.Proxy, w.Pool.Spec.RegistryMirrors = nil, nil
	w.UserConfigs, w.PullSecret, w.TrustBundle = nil, nil, nil
	in := w.MustGather(t)
	if !in.UserConfigs.IsEmpty() || in.PullSecret != nil || in.TrustBundle != "" || !in.Proxy.IsZero() || in.RegistryMirrors != nil || in.Sources != nil {
		t.Errorf("unset inputs are not empty: %+v", in)
	}
}

// TestGatherOrderDoesNotMatter: listing the same ConfigMaps and mirrors in
// another order gathers the same inputs.
func TestGatherOrderDoesNotMatter(t *testing.T) {
	a := inputstest.New()
	b := inputstest.New()
	slices.Reverse(b.Pool.Spec.Config)
	slices.Reverse(b.Pool.Spec.RegistryMirrors)
	slices.Reverse(b.Pool.Spec.Proxy.NoProxy)
	if ia, ib := a.MustGather(t), b.MustGather(t); !reflect.DeepEqual(ia, ib) {
		t.Errorf("inputs differ:\n%+v\n%+v", ia, ib)
	}
}

func TestGatherNamesWhatIsWrong(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(w *inputstest.World)
		reason  string
		message string
	}{
		{"user config missing", func(w *inputstest.World) { w.UserConfigs = w.UserConfigs[1:] },
			nodepoolv1.ReasonConfigNotFound, "ConfigMap team-a/chrony: not found: create it or remove it from spec.config"},
		{"pull secret missing", func(w *inputstest.World) { w.PullSecret = nil },
			nodepoolv1.ReasonConfigNotFound, "Secret team-a/pull-secret: not found: create it or fix spec.pullSecretRef"},
		{"pull secret without its key", func(w *inputstest.World) { w.PullSecret.Data = map[string][]byte{"token": []byte("x")} },
			nodepoolv1.ReasonInvalidConfig, `Secret team-a/pull-secret: has no key ".dockerconfigjson"`},
		{"pull secret not a docker config", func(w *inputstest.World) { w.PullSecret.Data[corev1.DockerConfigJsonKey] = []byte(`{"user":"x"}`) },
			nodepoolv1.ReasonInvalidConfig, `with an "auths" object`},
		{"trust bundle missing", func(w *inputstest.World) { w.TrustBundle = nil },
			nodepoolv1.ReasonConfigNotFound, "ConfigMap team-a/corp-ca: not found"},
		{"trust bundle without its key", func(w *inputstest.World) { w.TrustBundle.Data = map[string]string{"ca.crt": inputstest.TrustBundlePEM} },
			nodepoolv1.ReasonInvalidConfig, `ConfigMap team-a/corp-ca: has no key "ca-bundle.crt"`},
		{"trust bundle holding a key", func(w *inputstest.World) {
			w.TrustBundle.Data["ca-bundle.crt"] += "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
		}, nodepoolv1.ReasonInvalidConfig, `PEM block of type "PRIVATE KEY"`},
		{"trust bundle not PEM", func(w *inputstest.World) { w.TrustBundle.Data["ca-bundle.crt"] = "hello" },
			nodepoolv1.ReasonInvalidConfig, "not a PEM block"},
		{"cluster missing", func(w *inputstest.World) { w.Cluster = nil },
			nodepoolv1.ReasonClusterNotFound, "Cluster team-a/prod-1: not found"},
		{"cluster without endpoint", func(w *inputstest.World) { w.Cluster.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{} },
			inputs.ReasonClusterNotReady, "has no spec.controlPlaneEndpoint.host yet"},
		{"cluster with a bad CIDR", func(w *inputstest.World) { w.Cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"10.0.0.0"} },
			nodepoolv1.ReasonInvalidConfig, `Cluster team-a/prod-1: spec.clusterNetwork.pods.cidrBlocks[0]: "10.0.0.0" is not a CIDR`},
		{"management config missing", func(w *inputstest.World) { w.Management = nil },
			nodepoolv1.ReasonConfigNotFound, "ConfigMap nodepool-system/management-config: not found: the platform's management config is missing"},
		{"management config invalid", func(w *inputstest.World) { w.Management.Data["config"] = "apiServerProxyImage: ''\n" },
			nodepoolv1.ReasonInvalidConfig, "ConfigMap nodepool-system/management-config: management config key \"config\": apiServerProxyImage: is empty"},
		{"template missing", func(w *inputstest.World) { w.Template = nil },
			nodepoolv1.ReasonConfigNotFound, "SimMachineTemplate team-a/small: not found"},
		{"template CRD missing", func(w *inputstest.World) { w.CRD = nil },
			nodepoolv1.ReasonInvalidConfig, "NodePool team-a/workers: spec.infrastructureTemplateRef: no CustomResourceDefinition simmachinetemplates.infrastructure.sim.nodepool.dev"},
		{"template CRD without contract label", func(w *inputstest.World) { w.CRD.Labels = nil },
			nodepoolv1.ReasonInvalidConfig, "does not implement the Cluster API v1beta2 contract"},
		{"template without spec", func(w *inputstest.World) { delete(w.Template.Object, "spec") },
			nodepoolv1.ReasonInvalidConfig, "SimMachineTemplate team-a/small: has no spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := inputstest.New()
			tt.mutate(w)
			_, err := w.Gather(context.Background())
			if err == nil {
				t.Fatal("Gather succeeded")
			}
			if r := inputs.Reason(err); r != tt.reason {
				t.Errorf("reason %q, want %q", r, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error does not contain %q:\n%v", tt.message, err)
			}
		})
	}
}

func TestGatherReportsEveryProblemAtOnce(t *testing.T) {
	w := inputstest.New()
	w.PullSecret, w.TrustBundle = nil, nil
	_, err := w.Gather(context.Background())
	for _, s := range []string{"Secret team-a/pull-secret", "ConfigMap team-a/corp-ca"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error does not name %s: %v", s, err)
		}
	}
}

// failingReader fails every read of a Secret as an API server would under load.
type failingReader struct{ client.Reader }

func (r failingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return apierrors.NewServerTimeout(schema.GroupResource{Resource: "secrets"}, "get", 1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestGatherTransientErrorHasNoReason(t *testing.T) {
	w := inputstest.New()
	_, err := gather.Gather(context.Background(), failingReader{w.Client()}, w.Pool, w.Settings)
	if err == nil {
		t.Fatal("Gather succeeded")
	}
	if r := inputs.Reason(err); r != "" {
		t.Errorf("a transient error has reason %q", r)
	}
	if !apierrors.IsServerTimeout(err) || !strings.Contains(err.Error(), "reading Secret team-a/pull-secret") {
		t.Errorf("error does not wrap the API error with context: %v", err)
	}
}

func TestSettingsAreValidated(t *testing.T) {
	for name, mutate := range map[string]func(*inputs.Settings){
		"plain http URL":   func(s *inputs.Settings) { s.PayloadServerURL = "http://payload.example/ignition" },
		"no CA":            func(s *inputs.Settings) { s.PayloadServerCA = nil },
		"no renderer":      func(s *inputs.Settings) { s.RendererVersion = "" },
		"CA not a PEM":     func(s *inputs.Settings) { s.PayloadServerCA = []byte("x") },
		"URL without host": func(s *inputs.Settings) { s.PayloadServerURL = "https:///ignition" },
	} {
		t.Run(name, func(t *testing.T) {
			w := inputstest.New()
			mutate(&w.Settings)
			_, err := w.Gather(context.Background())
			if err == nil || inputs.Reason(err) != "" || !strings.HasPrefix(err.Error(), "controller settings:") {
				t.Errorf("got %v", err)
			}
		})
	}
}
