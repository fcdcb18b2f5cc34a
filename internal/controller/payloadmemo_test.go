package controller

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

func TestAPayloadSecretIsDecodedOnceAndItsFragmentsKeptOnce(t *testing.T) {
	p, other := twoPoolsPayloads(t)
	secretOf := func(pl *payload.Payload, uid, rv string) *corev1.Secret { return payloadSecretOf(t, pl, uid, rv) }
	ctx := context.Background()
	m := newPayloadMemo(16, nil)
	s := secretOf(p, "uid-1", "1")
	first, err := m.decode(ctx, p.Pool, s)
	if err != nil {
		t.Fatal(err)
	}
	if first.Hash != p.Hash || len(first.Fragments) != len(p.Fragments) || first.Ignition != nil {
		t.Fatalf("decoded %s with %d fragments (Ignition kept: %v), want %s with %d and no Ignition",
			first.Hash, len(first.Fragments), first.Ignition != nil, p.Hash, len(p.Fragments))
	}
	if again, _ := m.decode(ctx, p.Pool, s); again != first {
		t.Fatal("the same Secret at the same resourceVersion was decoded again")
	}
	s.ResourceVersion = "2"
	if again, _ := m.decode(ctx, p.Pool, s); again == first || again.Hash != p.Hash {
		t.Fatal("a Secret at a new resourceVersion was served from the memo")
	}
	o, err := m.decode(ctx, other.Pool, secretOf(other, "uid-2", "1"))
	if err != nil {
		t.Fatal(err)
	}
	for c, f := range o.Fragments {
		if &f[0] != &first.Fragments[c][0] {
			t.Fatalf("fragment %s of two pools' payloads is kept twice", c)
		}
	}
	if reflect.ValueOf(o.Fragments).Pointer() != reflect.ValueOf(first.Fragments).Pointer() ||
		reflect.ValueOf(o.Manifest).Pointer() != reflect.ValueOf(first.Manifest).Pointer() {
		t.Fatal("two payloads of the same fragments do not share their manifest and fragments")
	}
	if o.Hash != other.Hash || o.Pool != "other-pool" {
		t.Fatalf("the other pool's payload reads as %s of %s", o.Hash, o.Pool)
	}
	// A Secret whose manifest names fragments the memo holds is read
	// without inflating it: its own fragments are not read at all.
	known := secretOf(p, "uid-3", "1")
	known.Data[secrets.KeyFragments] = []byte("not gzip")
	if k, err := m.decode(ctx, p.Pool, known); err != nil || k.Hash != p.Hash ||
		reflect.ValueOf(k.Fragments).Pointer() != reflect.ValueOf(first.Fragments).Pointer() {
		t.Fatalf("a payload Secret of known fragments was not read from the memo: %v", err)
	}
	// Anything else is decoded whole, and a corrupt one refused: fragments
	// the memo does not hold, or a manifest that does not give the hash.
	fresh := newPayloadMemo(16, nil)
	bad := secretOf(p, "uid-4", "1")
	bad.Data[secrets.KeyFragments] = []byte("not gzip")
	if _, err := fresh.decode(ctx, p.Pool, bad); err == nil {
		t.Fatal("a corrupt payload Secret of unknown fragments decoded")
	}
	forged := secretOf(p, "uid-5", "1")
	forged.Annotations[secrets.AnnotationPayloadHash] = other.Hash
	forged.Labels[secrets.LabelPayload] = other.Hash[:secrets.PayloadLabelLength]
	forged.Data[secrets.KeyFragments] = []byte("not gzip")
	if _, err := m.decode(ctx, p.Pool, forged); err == nil {
		t.Fatal("a payload Secret whose manifest does not give its hash was read from the memo")
	}
}

func TestACachedPayloadSecretHoldsItsManifestOnlyAndIsReadWholeWhenNeeded(t *testing.T) {
	ctx := context.Background()
	p, other := twoPoolsPayloads(t)
	whole := payloadSecretOf(t, p, "uid-1", "1")
	api := fake.NewClientBuilder().WithObjects(whole.DeepCopy()).Build()
	cached := whole.DeepCopy()
	secrets.StripPayload(cached)
	if len(cached.Data) != 1 || cached.Data[secrets.KeyManifest] == nil || !secrets.Stripped(cached) {
		t.Fatalf("a stripped payload Secret holds %d keys, want its manifest only", len(cached.Data))
	}
	token := &corev1.Secret{ObjectMeta: whole.ObjectMeta, Data: map[string][]byte{"token": []byte("x")}}
	token.Labels = map[string]string{secrets.LabelKind: secrets.KindToken}
	if secrets.StripPayload(token); string(token.Data["token"]) != "x" {
		t.Fatal("StripPayload dropped the data of a Secret that is not a payload's")
	}
	m := newPayloadMemo(16, api)
	got, err := m.decode(ctx, p.Pool, cached)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != p.Hash || !reflect.DeepEqual(got.Fragments, p.Fragments) {
		t.Fatalf("a stripped payload Secret decoded as %s with %d fragments, want %s with %d", got.Hash, len(got.Fragments), p.Hash, len(p.Fragments))
	}
	// Another pool's Secret of the same fragments needs no read at all.
	theirs := payloadSecretOf(t, other, "uid-2", "1")
	secrets.StripPayload(theirs)
	if o, err := newPayloadMemoFrom(m).decode(ctx, other.Pool, theirs); err != nil || o.Hash != other.Hash {
		t.Fatalf("a stripped payload Secret of known fragments: %v", err)
	}
}

// newPayloadMemoFrom is m unable to read the API server.
func newPayloadMemoFrom(m *payloadMemo) *payloadMemo {
	c := *m
	c.api = nil
	return &c
}

// twoPoolsPayloads are the payloads of two pools of the same inputs.
func twoPoolsPayloads(t *testing.T) (p, other *payload.Payload) {
	t.Helper()
	p, _, err := payload.Render(inputstest.New().MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	if other, err = payload.Compose("other-pool", p.Fragments); err != nil {
		t.Fatal(err)
	}
	return p, other
}

// payloadSecretOf is pl's payload Secret as the API server has it.
func payloadSecretOf(t *testing.T, pl *payload.Payload, uid, rv string) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewPayloadSecret("ns", secrets.PayloadSecretName(pl.Pool, pl.Hash), secrets.FromPayload(pl))
	if err != nil {
		t.Fatal(err)
	}
	s.UID, s.ResourceVersion = types.UID(uid), rv
	return s
}
