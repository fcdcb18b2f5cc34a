//go:build !fuzzonly

package payloadserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/harness"
)

// serverUser is the payload server's ServiceAccount, as the shipped
// manifests name it.
const serverUser = "system:serviceaccount:nodepool-system:nodepool-payload-server"

// createShipped creates the objects config/<dir> builds but those of the
// kinds skip, each passed to edit (if not nil) first; objects already there
// are kept.
func createShipped(t *testing.T, e *harness.Env, dir string, skip []string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	for _, u := range buildManifests(t, dir) {
		if slices.Contains(skip, u.GetKind()) {
			continue
		}
		if edit != nil {
			edit(u)
		}
		if err := e.Client.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// asServer reaches the API server as the payload server's ServiceAccount
// (impersonated, with its groups): the config the server runs with, and a
// client.
func asServer(t *testing.T, e *harness.Env) (*rest.Config, client.Client) {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serverUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:nodepool-system", "system:authenticated"},
	}
	as, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, as
}

// TestShippedRBACServesItsNamespacesAndNothingElse runs the server as its
// ServiceAccount (impersonated) with the RBAC and admission policy of
// config/payload-server/namespaced, bound in one pool namespace: it serves
// and records first fetches there, and cannot read a Secret of another
// namespace, list Secrets cluster-wide, or write anything but the
// first-fetch annotation of a token Secret.
func TestShippedRBACServesItsNamespacesAndNothingElse(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	served, other := e.NewNamespace(t), e.NewNamespace(t)
	for _, name := range []string{"nodepool-system", "dev"} {
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	createShipped(t, e, "payload-server/namespaced", []string{"Deployment", "Service"}, func(u *unstructured.Unstructured) {
		if u.GetKind() == "RoleBinding" {
			// The shipped binding, in the test's pool namespace.
			u.SetNamespace(served)
		}
	})
	cfg, as := asServer(t, e)

	p := createPool(t, e.Client, served, "workers", 1<<10)
	ts := startServer(t, Options{Config: cfg, Namespaces: []string{served}})
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	eventually(t, 30*time.Second, func() (bool, string) {
		var s corev1.Secret
		if err := e.Client.Get(ctx, p.tokenSecret, &s); err != nil {
			return false, err.Error()
		}
		_, ok := s.Annotations[secrets.AnnotationFirstFetch]
		return ok, "the first fetch is not recorded"
	})

	// Reads outside its namespaces are forbidden.
	foreign := createPool(t, e.Client, other, "workers", 1<<10)
	var s corev1.Secret
	if err := as.Get(ctx, foreign.tokenSecret, &s); !apierrors.IsForbidden(err) {
		t.Errorf("get of a token Secret in another namespace: %v, want forbidden", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(other)); !apierrors.IsForbidden(err) {
		t.Errorf("list of Secrets in another namespace: %v, want forbidden", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("list of Secrets in every namespace: %v, want forbidden", err)
	}
	if status, _ := ts.get(t, foreign.token.Current); status != http.StatusNetworkAuthenticationRequired {
		t.Errorf("a token of another namespace got %d", status)
	}

	// Writes other than recording a first fetch are refused, in its own
	// namespace too.
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "unrelated"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := e.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	fresh := createPool(t, e.Client, served, "fresh", 1<<10)
	patch := func(name types.NamespacedName, mut func(*corev1.Secret)) error {
		var cur corev1.Secret
		if err := e.Client.Get(ctx, name, &cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		mut(next)
		return as.Patch(ctx, next, client.MergeFrom(&cur))
	}
	annotate := func(k, v string) func(*corev1.Secret) {
		return func(s *corev1.Secret) {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
	}
	now := secrets.FormatTime(time.Now())
	refused := map[string]func() error{
		"first fetch on a Secret that is not a token Secret": func() error {
			return patch(types.NamespacedName{Namespace: served, Name: "unrelated"}, annotate(secrets.AnnotationFirstFetch, now))
		},
		"another annotation on a token Secret": func() error {
			return patch(fresh.tokenSecret, annotate("example.com/x", "y"))
		},
		"a token Secret's data": func() error {
			return patch(fresh.tokenSecret, func(s *corev1.Secret) { s.Data[secrets.KeyPayloadHash] = []byte(p.payload.Hash) })
		},
		"a token Secret's labels": func() error {
			return patch(fresh.tokenSecret, func(s *corev1.Secret) { s.Labels[secrets.LabelPool] = "other" })
		},
		"a first fetch already recorded": func() error {
			return patch(p.tokenSecret, annotate(secrets.AnnotationFirstFetch, "2000-01-01T00:00:00Z"))
		},
		"a payload Secret's labels": func() error {
			return patch(types.NamespacedName{Namespace: served, Name: "workers-payload-" + p.payload.Hash[:16]}, func(s *corev1.Secret) { s.Labels["x"] = "y" })
		},
		"creating a Secret": func() error {
			return as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "created"}})
		},
		"deleting a Secret": func() error {
			return as.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: served, Name: "unrelated"}})
		},
	}
	// The policy takes effect shortly after it is created: wait for it
	// with a write that changes something each time (a write that changes
	// nothing is not refused).
	n := 0
	eventually(t, 30*time.Second, func() (bool, string) {
		n++
		err := patch(types.NamespacedName{Namespace: served, Name: "unrelated"}, annotate("example.com/probe", fmt.Sprint(n)))
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), fmt.Sprintf("got %v, want forbidden", err)
	})
	for name, write := range refused {
		t.Run(name, func(t *testing.T) {
			if err := write(); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want forbidden", err)
			}
		})
	}
	// What it does write, it may: the first fetch of the fresh pool.
	if err := patch(fresh.tokenSecret, annotate(secrets.AnnotationFirstFetch, now)); err != nil {
		t.Fatalf("recording a first fetch as the server: %v", err)
	}
}
