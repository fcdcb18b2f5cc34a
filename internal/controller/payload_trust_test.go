package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

func TestTheMemoRefusesAPayloadWhoseManifestDoesNotGiveItsHashAndRemembersIt(t *testing.T) {
	ctx := context.Background()
	p, _ := twoPoolsPayloads(t)
	// The pool's payload name and hash, consistent fragments and manifest
	// of another content: a forger who made the Secret first.
	forged := payloadSecretOf(t, p, "uid-1", "1")
	genuine := forged.DeepCopy()
	genuine.UID = "uid-genuine"
	evil := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/evil"}]}}`)
	replaceFragment(t, forged, "release", evil)
	api := &countingReader{Reader: fake.NewClientBuilder().WithObjects(forged.DeepCopy()).Build()}
	m := newPayloadMemo(16, api)
	// The memo knows the genuine content (another pool decoded it): the
	// forged manifest is not it.
	if _, err := m.decode(ctx, p.Pool, genuine); err != nil {
		t.Fatal(err)
	}
	cached := forged.DeepCopy()
	secrets.StripPayload(cached)
	for range 2 {
		_, err := m.decode(ctx, p.Pool, cached)
		if secrets.RefusalReason(err) != secrets.RefusedHashMismatch {
			t.Fatalf("a forged payload Secret of the right name: %v, want a refusal for its hash", err)
		}
	}
	if api.gets.Load() != 1 {
		t.Errorf("a refused Secret was read %d times at the same resourceVersion, want once", api.gets.Load())
	}
}

func TestARefusedPayloadSecretIsReportedOncePerVersionWithoutItsContent(t *testing.T) {
	_, pool := testPool()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec, refusals: newLRU[string, bool](16)}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "aaaa-payload", UID: "forged-uid", ResourceVersion: "1"}}
	err := secrets.CheckPayloadName(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "aaaa-payload",
		Labels:      map[string]string{secrets.LabelPool: "workers"},
		Annotations: map[string]string{secrets.AnnotationPayloadHash: strings.Repeat("ab", 32)}}})
	refusal := observe.Refusal{Secret: s, Reason: secrets.RefusedNameMismatch, Err: err}
	before := testutil.ToFloat64(payloadsRefused.WithLabelValues(secrets.RefusedNameMismatch))
	r.reportRefusals(pool, []observe.Refusal{refusal})
	r.reportRefusals(pool, []observe.Refusal{refusal})
	if got := testutil.ToFloat64(payloadsRefused.WithLabelValues(secrets.RefusedNameMismatch)) - before; got != 1 {
		t.Errorf("nodepool_payload_refused_total grew by %v for one Secret version, want 1", got)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning "+nodepoolv1.EventPayloadRefused) || !strings.Contains(e, "aaaa-payload") || !strings.Contains(e, secrets.RefusedNameMismatch) {
			t.Errorf("event %q", e)
		}
	default:
		t.Fatal("no event for a refused payload Secret")
	}
	select {
	case e := <-rec.Events:
		t.Fatalf("a second event for the same Secret version: %q", e)
	default:
	}
	s.ResourceVersion = "2"
	r.reportRefusals(pool, []observe.Refusal{refusal})
	if len(rec.Events) != 1 {
		t.Errorf("a new version of a refused Secret: %d events, want 1", len(rec.Events))
	}
}

func TestTheInUseFinalizerGoesOnlyOnSecretsTheControllerNamed(t *testing.T) {
	scheme, pool := testPool()
	hash := strings.Repeat("cd", 32)
	own := func(name string, annotations map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations}}
		if err := controllerutil.SetControllerReference(pool, s, scheme); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ud := own(secrets.UserDataSecretName(pool.Name, hash), map[string]string{secrets.AnnotationRolloutHash: hash})
	forgedUD := own("aaaa-userdata", map[string]string{secrets.AnnotationRolloutHash: hash})
	tok := own(secrets.TokenSecretName(pool.Name, hash), nil)
	forgedTok := own("aaaa-token", nil)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ud, forgedUD, tok, forgedTok).Build()
	get := func(s *corev1.Secret) *corev1.Secret {
		got := &corev1.Secret{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	w := &world{Objects: observe.Objects{
		UserData:      map[string]*corev1.Secret{ud.Name: get(ud), forgedUD.Name: get(forgedUD)},
		Tokens:        map[string]*corev1.Secret{tok.Name: get(tok), forgedTok.Name: get(forgedTok)},
		DecodedTokens: map[string]secrets.Token{tok.Name: {RolloutHash: hash}, forgedTok.Name: {RolloutHash: hash}},
		Payloads:      map[string]*corev1.Secret{},
	}}
	r := &Reconciler{Client: c}
	if err := r.protectInUse(context.Background(), pool, w); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{ud, tok} {
		if !controllerutil.ContainsFinalizer(get(s), nodepoolv1.FinalizerInUse) {
			t.Errorf("the controller's own %s is not protected", s.Name)
		}
	}
	for _, s := range []*corev1.Secret{forgedUD, forgedTok} {
		if controllerutil.ContainsFinalizer(get(s), nodepoolv1.FinalizerInUse) {
			t.Errorf("Secret %s, of no name the controller gives, got the in-use finalizer", s.Name)
		}
	}
}

// replaceFragment gives payload Secret s another fragment of component and
// a manifest that matches its fragments, keeping the hash it claims.
func replaceFragment(t *testing.T, s *corev1.Secret, component string, fragment []byte) {
	t.Helper()
	raw, err := secrets.Gunzip(s.Data[secrets.KeyFragments])
	if err != nil {
		t.Fatal(err)
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(raw, &frags); err != nil {
		t.Fatal(err)
	}
	frags[component] = fragment
	manifest := map[string]string{}
	for c, f := range frags {
		manifest[c] = payload.Digest(f)
	}
	rawFrags, _ := json.Marshal(frags)
	rawManifest, _ := json.Marshal(manifest)
	s.Data[secrets.KeyFragments], s.Data[secrets.KeyManifest] = secrets.Gzip(rawFrags), rawManifest
}

func TestAPayloadSecretMadeFirstUnderThePoolsNameIsNeverAdopted(t *testing.T) {
	scheme, pool := testPool()
	p, _ := twoPoolsPayloads(t)
	p, err := payload.Compose(pool.Name, p.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := secrets.NewPayloadSecret(pool.Namespace, secrets.PayloadSecretName(pool.Name, p.Hash), secrets.FromPayload(p))
	if err != nil {
		t.Fatal(err)
	}
	replaceFragment(t, forged, "release", []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/evil"}]}}`))
	if err := controllerutil.SetControllerReference(pool, forged, scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(forged).Build()
	r := &Reconciler{Client: c, APIReader: c}
	if err := r.storePayload(context.Background(), pool, p); !isConflict(err) {
		t.Fatalf("storing a payload whose name a forged Secret holds: %v, want a name conflict", err)
	}
	got := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(forged), got); err != nil {
		t.Fatal(err)
	}
	if controllerutil.ContainsFinalizer(got, nodepoolv1.FinalizerInUse) {
		t.Error("the forged Secret got the in-use finalizer")
	}
	// The genuine Secret already stored is this payload: no conflict.
	genuine, err := secrets.NewPayloadSecret(pool.Namespace, secrets.PayloadSecretName(pool.Name, p.Hash), secrets.FromPayload(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := controllerutil.SetControllerReference(pool, genuine, scheme); err != nil {
		t.Fatal(err)
	}
	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(genuine).Build()
	r = &Reconciler{Client: c, APIReader: c}
	if err := r.storePayload(context.Background(), pool, p); err != nil {
		t.Fatalf("storing a payload stored already: %v", err)
	}
}
