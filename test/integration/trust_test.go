package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/stack"
)

// payloadSecretsOf lists the pool's payload Secrets (by label: forged ones
// too), by name.
func payloadSecretsOf(t *testing.T, p *nodepoolv1.NodePool) map[string]*corev1.Secret {
	t.Helper()
	l := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), l, client.InNamespace(p.Namespace), client.MatchingLabels{secrets.LabelPool: p.Name, secrets.LabelKind: secrets.KindPayload}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Secret{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// forgePayload copies genuine under name, its labels, annotations (the
// hash it claims) and controller reference kept, with a user-configs
// fragment that also writes /etc/evil and a manifest that matches the
// fragments: what someone who can create Secrets in the namespace makes.
func forgePayload(t *testing.T, genuine *corev1.Secret, name string) *corev1.Secret {
	t.Helper()
	raw, err := secrets.Gunzip(genuine.Data[secrets.KeyFragments])
	if err != nil {
		t.Fatal(err)
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(raw, &frags); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(frags[inputs.UserConfigs.Name()], &cfg); err != nil {
		t.Fatal(err)
	}
	storage, _ := cfg["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
	}
	files, _ := storage["files"].([]any)
	storage["files"] = append(files, map[string]any{"path": "/etc/evil", "mode": 420, "contents": map[string]any{"source": "data:,evil"}})
	cfg["storage"] = storage
	if frags[inputs.UserConfigs.Name()], err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	manifest := map[string]string{}
	for c, f := range frags {
		manifest[c] = payload.Digest(f)
	}
	rawFrags, _ := json.Marshal(frags)
	rawManifest, _ := json.Marshal(manifest)
	forged := &corev1.Secret{Type: genuine.Type, Immutable: genuine.Immutable, Data: map[string][]byte{
		secrets.KeyIgnition: genuine.Data[secrets.KeyIgnition], secrets.KeyManifest: rawManifest, secrets.KeyFragments: secrets.Gzip(rawFrags),
	}}
	forged.Namespace, forged.Name = genuine.Namespace, name
	forged.Labels, forged.Annotations, forged.OwnerReferences = genuine.Labels, genuine.Annotations, genuine.OwnerReferences
	st.MustCreate(t, forged)
	return forged
}

// holdsEvil reports whether a payload Secret's fragments or Ignition
// config write /etc/evil.
func holdsEvil(t *testing.T, s *corev1.Secret) bool {
	t.Helper()
	for _, k := range []string{secrets.KeyFragments, secrets.KeyIgnition} {
		raw, err := secrets.Gunzip(s.Data[k])
		if err != nil {
			t.Fatalf("payload Secret %s, %s: %v", s.Name, k, err)
		}
		if strings.Contains(string(raw), "/etc/evil") {
			return true
		}
	}
	return false
}

func TestAForgedPayloadSecretIsNeverComposedOrFinalized(t *testing.T) {
	ctx := context.Background()
	p := st.NewPoolWith(t, "workers", 1, func(ns string, p *nodepoolv1.NodePool) {
		st.MustCreate(t, stack.PullSecret(ns, "pull", "user:one"))
		p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
	})
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	stored := payloadSecretsOf(t, p)
	if len(stored) != 1 {
		t.Fatalf("want one payload Secret, got %d", len(stored))
	}
	var genuine *corev1.Secret
	for _, s := range stored {
		genuine = s
	}
	running := secrets.PayloadHashOf(genuine)
	// Named to sort first, and last: whatever order the cache lists them
	// in, neither may stand in for the genuine Secret.
	forgeries := []*corev1.Secret{forgePayload(t, genuine, "aaaa-forged-payload"), forgePayload(t, genuine, "zzzz-forged-payload")}

	// A credential rotation on a settled OnNextRollout pool composes a
	// new payload from the running one's pinned fragments.
	stack.Update(t, env.Client, stack.PullSecret(p.Namespace, "pull", ""), func(s *corev1.Secret) { s.Data = stack.PullSecret("", "", "user:two").Data })
	next := stack.WaitFor(t, 2*time.Minute, "a new payload stored for the rotated credential", func() *corev1.Secret {
		for name, s := range payloadSecretsOf(t, p) {
			if h := secrets.PayloadHashOf(s); h != running && name == secrets.PayloadSecretName(p.Name, h) {
				return s
			}
		}
		return nil
	}, func(s *corev1.Secret) bool { return s != nil }, func(*corev1.Secret) string { return "none yet" })
	if holdsEvil(t, next) {
		t.Fatalf("the payload composed for the rotation, %s, holds the forged fragment", next.Name)
	}
	if _, err := secrets.DecodePayload(next); err != nil {
		t.Fatalf("the new payload does not decode: %v", err)
	}

	// The refusal is an event on the pool naming each forged Secret.
	stack.WaitFor(t, 30*time.Second, "a PayloadRefused event for each forged Secret", func() []string {
		evs := &eventsv1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(p.Namespace)); err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, f := range forgeries {
			found := false
			for _, e := range evs.Items {
				found = found || (e.Reason == nodepoolv1.EventPayloadRefused && e.Regarding.Name == p.Name && e.Type == corev1.EventTypeWarning &&
					strings.Contains(e.Note, f.Name) && !strings.Contains(e.Note, "/etc/evil"))
			}
			if !found {
				missing = append(missing, f.Name)
			}
		}
		return missing
	}, func(missing []string) bool { return len(missing) == 0 }, func(missing []string) string { return fmt.Sprintf("no event for %v", missing) })

	// The forged Secrets never got the in-use finalizer: deleting them
	// does not hang.
	for _, f := range forgeries {
		got := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f), got); err != nil {
			t.Fatal(err)
		}
		if controllerutil.ContainsFinalizer(got, nodepoolv1.FinalizerInUse) {
			t.Errorf("forged Secret %s got the controller's in-use finalizer", f.Name)
		}
		if err := env.Client.Delete(ctx, got); err != nil {
			t.Fatal(err)
		}
		stack.WaitFor(t, 15*time.Second, "forged Secret "+f.Name+" deleted", func() error {
			return env.Client.Get(ctx, client.ObjectKeyFromObject(f), &corev1.Secret{})
		}, apierrors.IsNotFound, func(err error) string { return fmt.Sprint(err) })
	}
	// The genuine Secrets keep theirs.
	for _, s := range []*corev1.Secret{genuine, next} {
		got := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			t.Fatal(err)
		}
		if !controllerutil.ContainsFinalizer(got, nodepoolv1.FinalizerInUse) {
			t.Errorf("the controller's own payload Secret %s lacks the in-use finalizer", s.Name)
		}
	}
}

// fetchWith asks the stack's payload server for a payload with token, and
// returns the HTTP status.
func fetchWith(t *testing.T, token string) int {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(settings.Inputs.PayloadServerCA)) {
		t.Fatal("the stack's payload server CA does not parse")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodGet, settings.Inputs.PayloadServerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// tokenSecretsOf lists the pool's token Secrets (by label: forged ones
// too), by name.
func tokenSecretsOf(t *testing.T, p *nodepoolv1.NodePool) map[string]*corev1.Secret {
	t.Helper()
	l := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), l, client.InNamespace(p.Namespace), client.MatchingLabels{secrets.LabelPool: p.Name, secrets.LabelKind: secrets.KindToken}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Secret{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// counter is the value of a counter the controller exports (it runs in
// this process), 0 when there is no such series.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := stack.Metric(t, name, labels)
	return v
}

// Issue 41 point 5: someone who can create Secrets in a pool's namespace
// makes a token Secret under the controller's name for a token (its
// rollout-hash annotation and name agree), with the pool's labels and
// controller reference copied and a token of their choosing pointing at the
// pool's payload. The controller never takes it as the pool's: it is
// refused (a PayloadRefused event naming it, nodepool_payload_refused_total
// with reason unbound_token), never mirrored, and deleted, so the payload
// server (which, without mirrors, reads the pools' Secrets) stops serving
// it; the pool's own token keeps working. Then the upgrade path: token
// Secrets older than the controller's token key (written by a release
// before it, or before the key was made again) are bound in place, never
// refused, and a scale-up still boots with them.
func TestAForgedTokenSecretIsRefusedNeverMirroredAndNotServed(t *testing.T) {
	ctx := context.Background()
	mirrored := withMirrors(t)

	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	own := tokenSecretsOf(t, p)
	if len(own) != 1 {
		t.Fatalf("want one token Secret, got %d", len(own))
	}
	var genuine *corev1.Secret
	for _, s := range own {
		genuine = s
	}
	if got := fetchWith(t, string(genuine.Data[secrets.KeyToken])); got != http.StatusOK {
		t.Fatalf("the pool's own token: HTTP %d, want 200", got)
	}
	before := counter(t, "nodepool_payload_refused_total", map[string]string{"reason": secrets.RefusedUnboundToken})

	chosen, err := secrets.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	fakeRollout := strings.Repeat("f", 16)
	forged, err := secrets.NewTokenSecret(p.Namespace, secrets.TokenSecretName(p.Name, fakeRollout), secrets.Token{
		Pool: p.Name, Current: chosen, RotatedAt: time.Now(), PayloadHash: string(genuine.Data[secrets.KeyPayloadHash]), RolloutHash: fakeRollout,
	})
	if err != nil {
		t.Fatal(err)
	}
	forged.OwnerReferences = genuine.OwnerReferences
	st.MustCreate(t, forged)

	stack.WaitFor(t, time.Minute, "a PayloadRefused event naming the forged token Secret", func() []string {
		return stack.PoolEvents(t, env.Client, p, nodepoolv1.EventPayloadRefused)
	}, func(notes []string) bool {
		for _, n := range notes {
			if strings.Contains(n, forged.Name) && !strings.Contains(n, chosen) {
				return true
			}
		}
		return false
	}, func(notes []string) string { return fmt.Sprintf("events: %q", notes) })
	stack.WaitFor(t, time.Minute, "the forged token Secret deleted", func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(forged), &corev1.Secret{})
	}, apierrors.IsNotFound, func(err error) string { return fmt.Sprint(err) })
	if got := counter(t, "nodepool_payload_refused_total", map[string]string{"reason": secrets.RefusedUnboundToken}) - before; got < 1 {
		t.Errorf("nodepool_payload_refused_total{reason=%q} grew by %v, want at least 1", secrets.RefusedUnboundToken, got)
	}
	stack.WaitFor(t, 30*time.Second, "the payload server refusing the forged token", func() int { return fetchWith(t, chosen) },
		func(code int) bool { return code != http.StatusOK }, func(code int) string { return fmt.Sprintf("HTTP %d", code) })

	// No mirror ever held it: every token mirror of the pool is one of the
	// pool's own tokens.
	mirrors := &corev1.SecretList{}
	if err := env.Client.List(ctx, mirrors, client.InNamespace(stack.ManagementNamespace), client.MatchingLabelsSelector{Selector: secrets.MirrorsOf(p.Namespace, p.Name)}); err != nil {
		t.Fatal(err)
	}
	tokenMirrors := 0
	for _, m := range mirrors.Items {
		if secrets.KindOf(&m) != secrets.KindTokenMirror {
			continue
		}
		tokenMirrors++
		if string(m.Data[secrets.KeyToken]) == chosen || string(m.Data[secrets.KeyPreviousToken]) == chosen || m.Name == secrets.MirrorName(p.Namespace, forged.Name) {
			t.Errorf("mirror %s holds the forged token", m.Name)
		}
	}
	if tokenMirrors == 0 {
		t.Error("the pool has no token mirror: the controller did not mirror its own token")
	}

	// The pool's own token was never touched and still serves.
	if got := fetchWith(t, string(genuine.Data[secrets.KeyToken])); got != http.StatusOK {
		t.Errorf("the pool's own token after the refusal: HTTP %d, want 200", got)
	}

	// Upgrade: the key made again after every token Secret of the pool (as
	// a first start of this release finds them) binds them in place.
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: stack.ManagementNamespace, Name: secrets.TokenKeyName}}); err != nil {
		t.Fatal(err)
	}
	st.MustRestartController(t, mirrored)
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To[int32](2) })
	st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	after := tokenSecretsOf(t, p)
	got, ok := after[genuine.Name]
	if !ok || got.UID != genuine.UID || string(got.Data[secrets.KeyToken]) != string(genuine.Data[secrets.KeyToken]) {
		t.Fatalf("the pool's token Secret %s was replaced after the key was made again; want it kept, bound in place", genuine.Name)
	}
	if got.Annotations[secrets.AnnotationTokenBinding] == "" {
		t.Errorf("token Secret %s older than the key has no binding annotation %s", got.Name, secrets.AnnotationTokenBinding)
	}
}
