//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"context"
	"errors"
	"io"
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
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"nodepool.dev/nodepool/test/harness"
)

// TestManifestsAreValidAndMatchTheCommand checks config/payload-server and
// its variants, as kustomize builds them: the API server accepts every
// object (server-side dry run), the container's arguments are flags of
// `nodepool payload-server`, the probes use the probe port, and the RBAC
// grants exactly what the server uses, where it reads: in nodepool-system
// only by default (the controller's mirrors), in listed namespaces or
// every namespace in the variants reading the pools' own Secrets.
func TestManifestsAreValidAndMatchTheCommand(t *testing.T) {
	for _, variant := range []string{"payload-server", "payload-server/namespaced", "payload-server/every-namespace"} {
		t.Run(variant, func(t *testing.T) { checkManifests(t, variant) })
	}
}

// buildManifests returns the objects kustomize builds from config/<dir>.
func buildManifests(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", dir))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	b, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("config/%s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
	return objs
}

func checkManifests(t *testing.T, dir string) {
	e := testEnv(t)
	ctx := context.Background()
	for _, name := range []string{"nodepool-system", "dev"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	objs := buildManifests(t, dir)
	for _, u := range objs {
		if err := e.Client.Create(ctx, u.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("config/%s: the API server refuses %s %s: %v", dir, u.GetKind(), u.GetName(), err)
		}
	}

	var dep appsv1.Deployment
	var role rbacv1.ClusterRole
	roles := 0
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			convert(t, u, &dep)
		case "ClusterRole", "Role":
			convert(t, u, &role)
			roles++
		}
	}
	if roles != 1 {
		t.Errorf("config/%s has %d roles of the payload server, want 1", dir, roles)
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
	// Reads come from the cache (list, watch); the one write is the
	// first-fetch patch.
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch", "patch"}}}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) && len(a.ResourceNames) == 0
	}) {
		t.Errorf("%s rules %+v, want %+v", role.Kind, role.Rules, want)
	}
	var bindings []string
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, u.GetKind()+" "+u.GetNamespace())
		}
	}
	namespaces, _ := cmd.Flags().GetStringSlice("namespaces")
	mirrors, _ := cmd.Flags().GetString("mirror-namespace")
	switch dir {
	case "payload-server":
		// The default: the mirrors, and a Role in their namespace only.
		if role.Kind != "Role" || role.Namespace != "nodepool-system" || mirrors != "nodepool-system" ||
			!slices.Equal(bindings, []string{"RoleBinding nodepool-system"}) || len(namespaces) != 0 {
			t.Errorf("%s in %q, bindings %v, --mirror-namespace %q and --namespaces %v; want a Role and RoleBinding in nodepool-system and --mirror-namespace=nodepool-system",
				role.Kind, role.Namespace, bindings, mirrors, namespaces)
		}
	case "payload-server/every-namespace":
		if !slices.Equal(bindings, []string{"ClusterRoleBinding "}) || len(namespaces) != 0 || mirrors != "" {
			t.Errorf("bindings %v and --namespaces %v, want one ClusterRoleBinding and every namespace", bindings, namespaces)
		}
	default:
		var want []string
		for _, n := range namespaces {
			want = append(want, "RoleBinding "+n)
		}
		if len(namespaces) == 0 || !slices.Equal(bindings, want) {
			t.Errorf("bindings %v, want a RoleBinding in each of --namespaces %v and nothing else", bindings, namespaces)
		}
	}
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}
