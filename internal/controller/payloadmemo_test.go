package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

func TestAPayloadSecretIsDecodedOnceAndItsFragmentsKeptOnce(t *testing.T) {
	p, _, err := payload.Render(inputstest.New().MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	other, err := payload.Compose("other-pool", p.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	secretOf := func(pl *payload.Payload, uid, rv string) *corev1.Secret {
		s, err := secrets.NewPayloadSecret("ns", secrets.PayloadSecretName(pl.Pool, pl.Hash), secrets.FromPayload(pl))
		if err != nil {
			t.Fatal(err)
		}
		s.UID, s.ResourceVersion = types.UID(uid), rv
		return s
	}
	m := newPayloadMemo(16)
	s := secretOf(p, "uid-1", "1")
	first, err := m.decode(p.Pool, s)
	if err != nil {
		t.Fatal(err)
	}
	if first.Hash != p.Hash || len(first.Fragments) != len(p.Fragments) || first.Ignition != nil {
		t.Fatalf("decoded %s with %d fragments (Ignition kept: %v), want %s with %d and no Ignition",
			first.Hash, len(first.Fragments), first.Ignition != nil, p.Hash, len(p.Fragments))
	}
	if again, _ := m.decode(p.Pool, s); again != first {
		t.Fatal("the same Secret at the same resourceVersion was decoded again")
	}
	s.ResourceVersion = "2"
	if again, _ := m.decode(p.Pool, s); again == first || again.Hash != p.Hash {
		t.Fatal("a Secret at a new resourceVersion was served from the memo")
	}
	o, err := m.decode(other.Pool, secretOf(other, "uid-2", "1"))
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
	if k, err := m.decode(p.Pool, known); err != nil || k.Hash != p.Hash ||
		reflect.ValueOf(k.Fragments).Pointer() != reflect.ValueOf(first.Fragments).Pointer() {
		t.Fatalf("a payload Secret of known fragments was not read from the memo: %v", err)
	}
	// Anything else is decoded whole, and a corrupt one refused: fragments
	// the memo does not hold, or a manifest that does not give the hash.
	fresh := newPayloadMemo(16)
	bad := secretOf(p, "uid-4", "1")
	bad.Data[secrets.KeyFragments] = []byte("not gzip")
	if _, err := fresh.decode(p.Pool, bad); err == nil {
		t.Fatal("a corrupt payload Secret of unknown fragments decoded")
	}
	forged := secretOf(p, "uid-5", "1")
	forged.Annotations[secrets.AnnotationPayloadHash] = other.Hash
	forged.Labels[secrets.LabelPayload] = other.Hash[:secrets.PayloadLabelLength]
	forged.Data[secrets.KeyFragments] = []byte("not gzip")
	if _, err := m.decode(p.Pool, forged); err == nil {
		t.Fatal("a payload Secret whose manifest does not give its hash was read from the memo")
	}
}
