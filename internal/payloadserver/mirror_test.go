//go:build !fuzzonly

package payloadserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/secrets"
)

// mirrorPool writes, as the controller does, the mirrors of the pool's
// token and payload Secrets into namespace ns, after mut (if any) edits
// the payload's mirror.
func mirrorPool(t testing.TB, c client.Client, ns string, p *testPool, mut func(*corev1.Secret)) (token, payload types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{payloadName(p.payload), p.tokenSecret.Name} {
		var src corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: p.ns, Name: name}, &src); err != nil {
			t.Fatal(err)
		}
		m, err := secrets.NewMirror(ns, &src, p.uid)
		if err != nil {
			t.Fatal(err)
		}
		if secrets.KindOf(m) == secrets.KindPayloadMirror {
			if mut != nil {
				mut(m)
			}
			payload = client.ObjectKeyFromObject(m)
		} else {
			token = client.ObjectKeyFromObject(m)
		}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return token, payload
}

// TestTheDefaultInstallServesMirrorsAndReadsNoOtherSecret runs the server
// as its ServiceAccount (impersonated) bound by the default
// config/payload-server, reading the controller's mirrors in
// nodepool-system: it is not ready until the controller marks the mirrors
// complete, then serves a pool of any namespace from its mirrors and
// records the first fetch on the token's mirror; it cannot read a Secret
// of a pool's namespace, and a forged mirror (content that does not hash
// to its claim, a name not the controller's) is never served.
func TestTheDefaultInstallServesMirrorsAndReadsNoOtherSecret(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	const mirrors = "nodepool-system"
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mirrors}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createShipped(t, e, "payload-server", []string{"Deployment", "Service", "PodDisruptionBudget"}, nil)
	cfg, as := asServer(t, e)
	// The shipped Role may be deleted by another test's cleanup of the
	// shared namespace: the marker of an earlier test is removed first.
	_ = e.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mirrors, Name: secrets.MirrorsReadyName}})

	poolNs := e.NewNamespace(t)
	p := createPool(t, e.Client, poolNs, "workers", 1<<10)
	tokenMirror, _ := mirrorPool(t, e.Client, mirrors, p, nil)

	ts := startServerUnready(t, Options{Config: cfg, MirrorNamespace: mirrors})
	// Not ready without the marker, however long: during an upgrade the
	// replicas reading the pools' own Secrets keep serving meanwhile.
	time.Sleep(2 * time.Second)
	if ok, status := ts.ready(t); ok {
		t.Fatalf("ready (%s) before the controller marked the mirrors complete", status)
	}
	if err := e.Client.Create(ctx, secrets.NewMirrorsReady(mirrors, time.Now())); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ts.waitReady(t)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	eventually(t, 30*time.Second, func() (bool, string) {
		var s corev1.Secret
		if err := e.Client.Get(ctx, tokenMirror, &s); err != nil {
			return false, err.Error()
		}
		_, ok := s.Annotations[secrets.AnnotationFirstFetch]
		return ok, "the first fetch is not recorded on the token's mirror"
	})

	// Forged mirrors, as someone who can write Secrets in nodepool-system
	// could make them: never served, each ignored for what is forged.
	forged := createPool(t, e.Client, poolNs, "forged", 1<<10)
	mirrorPool(t, e.Client, mirrors, forged, func(m *corev1.Secret) {
		// Another Ignition config under the genuine manifest and hash.
		other := testPayload(poolNs, "forged", "v2", 1<<10)
		o, err := secrets.NewPayloadSecret(poolNs, "x", other)
		if err != nil {
			t.Fatal(err)
		}
		m.Data[secrets.KeyIgnition] = o.Data[secrets.KeyIgnition]
	})
	renamed := createPool(t, e.Client, poolNs, "renamed", 1<<10)
	mirrorPool(t, e.Client, mirrors, renamed, func(m *corev1.Secret) { m.Name = poolNs + ".renamed-payload-aaaaaaaaaaaaaaaa" })
	eventually(t, 30*time.Second, func() (bool, string) {
		got := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonContentMismatch) +
			ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonNameMismatch)
		return got >= 2, "the forged mirrors are not refused yet"
	})
	for _, fp := range []*testPool{forged, renamed} {
		if status, _ := ts.get(t, fp.token.Current); status == http.StatusOK {
			t.Errorf("a forged mirror of pool %s was served", fp.name)
		}
	}
	// The pools' own Secrets are not read: a pool that has no mirror is
	// not served, and its namespace's Secrets are forbidden to the server.
	unmirrored := createPool(t, e.Client, poolNs, "unmirrored", 1<<10)
	time.Sleep(time.Second)
	if status, _ := ts.get(t, unmirrored.token.Current); status != http.StatusNetworkAuthenticationRequired {
		t.Errorf("a pool without mirrors got %d, want 511", status)
	}
	var s corev1.Secret
	if err := as.Get(ctx, p.tokenSecret, &s); !apierrors.IsForbidden(err) {
		t.Errorf("get of a pool's token Secret as the server: %v, want forbidden", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(poolNs)); !apierrors.IsForbidden(err) {
		t.Errorf("list of a pool namespace's Secrets as the server: %v, want forbidden", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("list of Secrets in every namespace as the server: %v, want forbidden", err)
	}
	// A payload mirror naming another incarnation of the pool (another
	// UID) than its token's mirror is not served to that token.
	other := createPool(t, e.Client, poolNs, "other", 1<<10)
	mirrorPool(t, e.Client, mirrors, other, func(m *corev1.Secret) {
		m.Annotations[secrets.AnnotationMirrorPoolUID] = string(uuid.NewUUID())
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		status, _ := ts.get(t, other.token.Current)
		return status != http.StatusOK && ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonOwnerMismatch) >= 1,
			"the owner mismatch is not reported"
	})
}
