package payloadserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/test/harness"
)

// TestManifestsAreValidAndMatchTheCommand checks config/payload-server: the
// API server accepts every object (server-side dry run), the container's
// arguments are flags of `nodepool payload-server`, the probes use the probe
// port, and the RBAC grants exactly what the server uses.
func TestManifestsAreValidAndMatchTheCommand(t *testing.T) {
	e := testEnv(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "config", "payload-server")
	var kust struct {
		Resources []string `json:"resources"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust)

	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nodepool-system"}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := e.Client.Create(ctx, u.DeepCopy(), client.DryRunAll); err != nil {
				t.Errorf("%s: the API server refuses %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
			objs = append(objs, &u)
		}
	}

	var dep appsv1.Deployment
	var role rbacv1.ClusterRole
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			convert(t, u, &dep)
		case "ClusterRole":
			convert(t, u, &role)
		}
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one container in the Deployment")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	cmd := NewCommand()
	if len(c.Args) == 0 || c.Args[0] != cmd.Name() {
		t.Fatalf("container args %v do not start with %q", c.Args, cmd.Name())
	}
	if err := cmd.ParseFlags(c.Args[1:]); err != nil {
		t.Fatalf("container args: %v", err)
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "probes" || p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			t.Errorf("probe %+v: want HTTP on the probes port", p)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "patch"}}}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) && len(a.ResourceNames) == 0
	}) {
		t.Errorf("ClusterRole rules %+v, want %+v", role.Rules, want)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}
