package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/settings"
)

// installUserRoles creates the shipped user ClusterRoles
// (config/rbac/user_roles.yaml) and checks they aggregate into
// Kubernetes' view, edit and admin.
func installUserRoles(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "user_roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"nodepool-view": {"view", "edit", "admin"}, "nodepool-edit": {"edit", "admin"}}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			t.Fatal(err)
		}
		for _, to := range want[role.Name] {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
				t.Errorf("ClusterRole %s does not aggregate into %s", role.Name, to)
			}
		}
		delete(want, role.Name)
		if err := st.Env.Client.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if len(want) > 0 {
		t.Fatalf("config/rbac/user_roles.yaml lacks %v", want)
	}
}

// bindViewer gives user Kubernetes' view and nodepool-view in ns, as a
// RoleBinding of view does once the aggregation controller has folded
// nodepool-view into view (the test control plane runs no aggregation
// controller: its view is empty, and nodepool-view alone must do).
func bindViewer(t *testing.T, ns, user string) {
	t.Helper()
	for _, role := range []string{"view", "nodepool-view"} {
		mustCreate(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
}

// Issue 41 point 8: a user with only view (and nodepool-view) in their
// namespace follows their pools with the plugin. rollout status, history
// and fleet -n answer from what the controller publishes; diff and plan,
// which need the pool's Secrets and the controller's settings, say which
// permission they need instead of failing. The user reads neither: the
// plugin asks (SelfSubjectAccessReview) before it reads.
func TestAViewerFollowsTheirPoolsWithoutSecretsOrTheControllersSettings(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "1 machine settled", settled(1))
	installUserRoles(t)
	const user = "alice@team-a.example"
	bindViewer(t, ns, user)

	// As the user (a rest.Config that impersonates them): no Secrets in
	// the namespace, not the controller's settings.
	cfg := rest.CopyConfig(st.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "secrets", Namespace: ns},
		{Verb: "get", Resource: "configmaps", Namespace: settings.DefaultNamespace, Name: settings.ConfigMapName},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Fatalf("the viewer may %s %s in %s: the test would prove nothing", a.Verb, a.Resource, a.Namespace)
		}
	}
	uc, err := client.New(cfg, client.Options{Scheme: st.Env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := uc.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{}); err != nil {
		t.Fatalf("the viewer cannot read the pool: %v", err)
	}

	as := []string{"--as", user, "--as-group", "system:authenticated"}
	run := func(args ...string) result {
		t.Helper()
		r := kubectl(t, ns, append(append([]string{}, as...), args...)...)
		if r.code != 0 {
			t.Fatalf("kubectl nodepool %s as %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), user, r.code, r.out, r.err)
		}
		if strings.Contains(r.out+r.err, "forbidden") {
			t.Errorf("kubectl nodepool %s as %s reports a refused read:\n%s%s", strings.Join(args, " "), user, r.out, r.err)
		}
		return r
	}

	status := run("rollout", "status", p.Name, "--watch=false")
	if !strings.Contains(status.out, "successfully rolled out") {
		t.Errorf("rollout status: %q, want the rollout complete", status.out)
	}
	for _, perm := range []string{"list secrets in namespace " + ns, "get configmaps " + settings.ConfigMapName} {
		if !strings.Contains(status.err, perm) {
			t.Errorf("rollout status does not say it needs %q for a prediction: %q", perm, status.err)
		}
	}
	if h := run("rollout", "history", p.Name); !strings.Contains(h.out, "1") {
		t.Errorf("rollout history: %q", h.out)
	}
	run("rollout", "history", p.Name, "--revision", "1")
	for _, args := range [][]string{{"diff", p.Name}, {"plan", "-f", writeManifests(t, []client.Object{poolSpec(ns, "workers", 2)})[0]}} {
		r := run(args...)
		if !strings.Contains(r.out, "list secrets in namespace "+ns) || !strings.Contains(r.out, "needs") {
			t.Errorf("kubectl nodepool %s: %q, want it to name the permission it needs", args[0], r.out)
		}
	}
	if f := run("fleet"); !strings.Contains(f.out, p.Name) {
		t.Errorf("fleet -n %s: %q, want the pool listed", ns, f.out)
	}
}
