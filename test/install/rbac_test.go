package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/process"
	"nodepool.dev/nodepool/test/stack"
)

// access is one request's verb and resource, as SelfSubjectAccessReview
// asks about it.
type access struct {
	verb, group, resource, subresource string
	// namespace; "pool" stands for a pool namespace the test makes.
	namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return fmt.Sprintf("%s %s in %q", a.verb, r, a.namespace)
}

// TestControllerRoleIsLeastPrivilege asks, as the controller's
// ServiceAccount bound by the shipped RBAC, what it may do: what it uses is
// allowed, and what it has no business with is not. Secrets and ConfigMaps
// stay readable in every namespace, by design: pools live in any namespace
// and reference pull secrets, user configs and their Cluster's kubeconfig
// Secret there, which RBAC cannot single out. Spec writes of NodePools,
// which RBAC cannot tell from the finalizer updates the controller makes,
// are refused by the shipped admission policy.
func TestControllerRoleIsLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	const pool = "pool"
	allowed := []access{
		{"list", "nodepool.dev", "nodepools", "", ""},
		{"update", "nodepool.dev", "nodepools", "", pool},
		{"patch", "nodepool.dev", "nodepools", "status", pool},
		{"create", "", "secrets", "", pool},
		{"delete", "", "secrets", "", pool},
		{"get", "", "configmaps", "", pool},
		{"create", "cluster.x-k8s.io", "machinedeployments", "", pool},
		{"patch", "cluster.x-k8s.io", "machines", "", pool},
		{"create", "apps", "controllerrevisions", "", pool},
		{"create", "events.k8s.io", "events", "", pool},
		{"create", "infrastructure.sim.nodepool.dev", "simmachinetemplates", "", pool},
		// Recording on a clone of its own which template generation it holds.
		{"patch", "infrastructure.sim.nodepool.dev", "simmachinetemplates", "", pool},
		{"update", "coordination.k8s.io", "leases", "", systemNamespace},
		{"create", "", "events", "", systemNamespace},
		// The published settings, in its own namespace only.
		{"patch", "", "configmaps", "", systemNamespace},
		{"create", "", "configmaps", "", systemNamespace},
		// Fleet rollouts: read, status patched; namespaces read for
		// their namespace selector.
		{"watch", "nodepool.dev", "fleetrollouts", "", ""},
		{"patch", "nodepool.dev", "fleetrollouts", "status", ""},
		{"list", "", "namespaces", "", ""},
	}
	denied := []access{
		// Machines are Cluster API's to create and delete.
		{"delete", "cluster.x-k8s.io", "machines", "", pool},
		{"create", "cluster.x-k8s.io", "machines", "", pool},
		{"update", "cluster.x-k8s.io", "machines", "", pool},
		{"patch", "cluster.x-k8s.io", "clusters", "", pool},
		{"delete", "cluster.x-k8s.io", "clusters", "", pool},
		// Pools are their owners' to create and delete; status is patched only.
		{"create", "nodepool.dev", "nodepools", "", pool},
		{"delete", "nodepool.dev", "nodepools", "", pool},
		{"update", "nodepool.dev", "nodepools", "status", pool},
		// Fleet rollouts are their authors' to write, pause and cancel.
		{"create", "nodepool.dev", "fleetrollouts", "", ""},
		{"patch", "nodepool.dev", "fleetrollouts", "", ""},
		{"delete", "nodepool.dev", "fleetrollouts", "", ""},
		{"update", "nodepool.dev", "fleetrollouts", "status", ""},
		{"patch", "", "namespaces", "", ""},
		// The management cluster's Nodes: workload Nodes are reached with
		// the Cluster's kubeconfig, not this role.
		{"get", "", "nodes", "", ""},
		{"patch", "", "nodes", "", ""},
		// Secrets and ConfigMaps are read, and written only as the
		// controller's own (create, patch, delete), never updated whole.
		{"update", "", "secrets", "", pool},
		{"create", "", "configmaps", "", pool},
		{"patch", "", "configmaps", "", pool},
		{"update", "", "configmaps", "", systemNamespace},
		{"delete", "", "configmaps", "", systemNamespace},
		{"update", "apps", "controllerrevisions", "", pool},
		// Leader election only in its own namespace.
		{"get", "coordination.k8s.io", "leases", "", pool},
		{"update", "coordination.k8s.io", "leases", "", "kube-system"},
		{"create", "", "events", "", pool},
		// Nothing that runs code or grants more.
		{"create", "", "pods", "", pool},
		{"create", "", "serviceaccounts", "token", systemNamespace},
		{"create", "apps", "deployments", "", systemNamespace},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"impersonate", "", "users", "", ""},
		{"delete", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", ""},
		{"create", "infrastructure.sim.nodepool.dev", "simmachines", "", pool},
	}
	cfg := serviceAccountConfig(t, systemNamespace, controllerName)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	can := func(a access) bool {
		if a.namespace == pool {
			a.namespace = ns
		}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, a := range allowed {
		if !can(a) {
			t.Errorf("the controller may not %s, which it needs", a)
		}
	}
	for _, a := range denied {
		if can(a) {
			t.Errorf("the controller may %s, which it has no business with", a)
		}
	}

	// Real requests, as the controller: deleting a Machine is refused, and
	// so is changing a pool's spec, while its finalizer may be written.
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "any"}}
	if err := as.Delete(ctx, m); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a Machine as the controller: %v, want forbidden", err)
	}
	p := stack.WorkersPool(ns, 1)
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	spec := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":7}}`))
	if err := as.Patch(ctx, p.DeepCopy(), spec, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "does not change a pool's spec") {
		t.Errorf("changing a pool's spec as the controller: %v, want refused by the admission policy", err)
	}
	fin := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":["`+nodepoolv1.Finalizer+`"]}}`))
	if err := as.Patch(ctx, p.DeepCopy(), fin, client.DryRunAll); err != nil {
		t.Errorf("adding the finalizer as the controller: %v", err)
	}
	// A fleet rollout triggers a pool by its annotations.
	ann := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"nodepool.dev/apply-pending-at":"2026-12-01T10:00:00Z","`+nodepoolv1.AnnotationFleetRollout+`":"proxy-fix"}}}`))
	if err := as.Patch(ctx, p.DeepCopy(), ann, client.DryRunAll); err != nil {
		t.Errorf("annotating a pool for a fleet rollout as the controller: %v", err)
	}
	if err := as.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &corev1.Node{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a management cluster Node as the controller: %v, want forbidden", err)
	}
}

// TestThePayloadServerHasNoClusterWideSecretAccess reads the shipped RBAC
// (config/default; the chart's defaults are the same objects, checked in
// hack/internal/dist) and asks the API server as the payload server's
// ServiceAccount: it may list, watch and patch Secrets in nodepool-system
// (the controller's mirrors) and has no verb on Secrets anywhere else.
func TestThePayloadServerHasNoClusterWideSecretAccess(t *testing.T) {
	ctx := context.Background()
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: payloadName, Namespace: systemNamespace}
	grantsSecrets := func(rules []rbacv1.PolicyRule) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, "") && (slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*")) {
				return true
			}
		}
		return false
	}
	for _, u := range shipped {
		var b rbacv1.RoleBinding // a ClusterRoleBinding converts alike
		switch u.GetKind() {
		case "ClusterRoleBinding", "RoleBinding":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == sa.Kind && s.Name == sa.Name && s.Namespace == sa.Namespace
		}) {
			continue
		}
		var role rbacv1.ClusterRole
		if err := shippedObject(b.RoleRef.Kind, b.RoleRef.Name, &role); err != nil {
			t.Fatal(err)
		}
		if grantsSecrets(role.Rules) && (u.GetKind() == "ClusterRoleBinding" || b.Namespace != systemNamespace) {
			t.Errorf("%s %s/%s gives the payload server %s %s's Secret rights outside %s", u.GetKind(), b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name, systemNamespace)
		}
	}
	ns := env.NewNamespace(t)
	cs, err := kubernetes.NewForConfig(serviceAccountConfig(t, systemNamespace, payloadName))
	if err != nil {
		t.Fatal(err)
	}
	can := func(verb, namespace string) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Resource: "secrets",
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, verb := range []string{"list", "watch", "patch"} {
		if !can(verb, systemNamespace) {
			t.Errorf("the payload server may not %s Secrets in %s, where the mirrors are", verb, systemNamespace)
		}
	}
	for _, verb := range []string{"get", "list", "watch", "patch", "update", "create", "delete"} {
		for _, where := range []string{ns, "kube-system", ""} {
			if can(verb, where) {
				t.Errorf("the payload server may %s Secrets in %q", verb, where)
			}
		}
	}
}

// TestShippedRolesHaveNoWildcards: every shipped rule names its verbs,
// groups and resources.
func TestShippedRolesHaveNoWildcards(t *testing.T) {
	for _, u := range shipped {
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		var r rbacv1.ClusterRole
		if err := shippedObject(u.GetKind(), u.GetName(), &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") || len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s %s: rule %v is broader than named verbs on named resources", u.GetKind(), u.GetName(), rule)
			}
		}
	}
}

// TestAMissingRuleFails shows that the shipped RBAC is what the controller
// runs with, and that a verb missing from it fails these tests: for each
// case the shipped role loses one verb, a controller replica runs a pool,
// and its refusal is seen (in its log, or in the pool's
// ReconciliationActive condition), as the check every wait makes sees it.
func TestAMissingRuleFails(t *testing.T) {
	cases := []struct {
		kind, resource, verb string
	}{
		{"ClusterRole", "secrets", "create"},             // the pool's user-data, token and payload
		{"ClusterRole", "controllerrevisions", "create"}, // the rollout history
		{"ClusterRole", "nodepools/status", "patch"},     // the pool's status
		{"ClusterRole", "machinedeployments", "create"},  // the pool's machines
		{"Role", "leases", "update"},                     // leader election
	}
	for _, c := range cases {
		t.Run(c.kind+"-"+strings.ReplaceAll(c.resource, "/", "-")+"-"+c.verb, func(t *testing.T) {
			strip(t, c.kind, c.resource, c.verb)
			r := startReplica(t, controllerName, "controller-without-"+c.verb, runOptions{noWait: true})
			r.ExpectRefusals()
			p := newPool(t, 1, 0)
			refusal := "cannot " + c.verb + " resource"
			line := stackWait(t, "the controller to be refused "+c.verb+" on "+c.resource, func() string {
				if line := r.Log.Find(refusal); strings.Contains(line, c.resource) {
					return line
				}
				got := &nodepoolv1.NodePool{}
				if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
					t.Fatal(err)
				}
				for _, cond := range got.Status.Conditions {
					if cond.Type == nodepoolv1.ConditionReconciliationActive && strings.Contains(cond.Message, refusal) && strings.Contains(cond.Message, c.resource) {
						return cond.Message
					}
				}
				return ""
			})
			t.Logf("refused: %.300s", line)
			// The pool's condition is patched before the reconcile returns
			// its error, which controller-runtime logs then: the log line
			// can come a moment after the condition.
			stackWait(t, "the refusal in the log, where checkReplicas looks", func() string { return r.Log.Find(process.Forbidden) })
		})
	}
}

// strip replaces the shipped kind nodepool-controller with one whose rule
// on resource lacks verb, until the test ends.
func strip(t *testing.T, kind, resource, verb string) {
	t.Helper()
	var original *unstructured.Unstructured
	for _, u := range shipped {
		if u.GetKind() == kind && u.GetName() == controllerName {
			original = u
		}
	}
	if original == nil {
		t.Fatalf("no shipped %s %s", kind, controllerName)
	}
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(original.Object, &role); err != nil {
		t.Fatal(err)
	}
	found := false
	for i, rule := range role.Rules {
		if slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
			if len(rule.Resources) > 1 {
				// Split the rule so the other resources keep the verb.
				rest := rule.DeepCopy()
				rest.Resources = slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == resource })
				role.Rules = append(role.Rules, *rest)
				rule.Resources = []string{resource}
			}
			rule.Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
			role.Rules[i] = rule
			found = true
		}
	}
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return len(r.Verbs) == 0 })
	if !found {
		t.Fatalf("the shipped %s has no %s on %s", kind, verb, resource)
	}
	stripped := original.DeepCopy()
	rules, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&role)
	if err != nil {
		t.Fatal(err)
	}
	stripped.Object["rules"] = rules["rules"]
	if err := apply(context.Background(), stripped); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := apply(context.Background(), original); err != nil {
			t.Error(err)
		}
	})
}

// stackWait polls read until it returns something, generously.
func stackWait(t *testing.T, what string, read func() string) string {
	t.Helper()
	return stack.WaitFor(t, timeout, what, read, func(s string) bool { return s != "" }, func(string) string { return "nothing yet" })
}
