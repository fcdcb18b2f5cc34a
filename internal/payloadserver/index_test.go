//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

func TestIndexResolvesATokenOnlyInItsOwnNamespaceAndPool(t *testing.T) {
	ix := NewIndex()
	a := testPayload("n1", "a", "v1", 100)
	b := testPayload("n1", "b", "v1", 100)
	for _, s := range []struct {
		ns string
		p  secrets.Payload
	}{{"n1", a}, {"n1", b}} {
		if err := ix.Upsert(payloadSecret(t, s.ns, payloadName(s.p), s.p, "1")); err != nil {
			t.Fatal(err)
		}
	}
	tok := func(ns, pool, hash string) string {
		cur := newToken(t)
		if err := ix.Upsert(tokenSecretObj(t, ns, pool+"-token", secrets.Token{Pool: pool, Current: cur, RotatedAt: time.Now(), PayloadHash: hash}, "1")); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	for _, tc := range []struct {
		name  string
		token string
		want  []byte // nil: no payload
	}{
		{"pool a's token", tok("n1", "a", a.Hash), a.Ignition},
		{"pool b's token", tok("n1", "b", b.Hash), b.Ignition},
		{"pool c's token pointing at a's payload hash", tok("n1", "c", a.Hash), nil},
		{"pool a's token in another namespace", tok("n2", "a", a.Hash), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := ix.Lookup(tc.token)
			if !ok {
				t.Fatal("token not found")
			}
			switch {
			case tc.want == nil && m.Payload != nil:
				t.Fatalf("got a payload of %d bytes", len(m.Payload.JSON))
			case tc.want != nil && (m.Payload == nil || !bytes.Equal(m.Payload.JSON, tc.want)):
				t.Fatal("did not get its own payload")
			}
		})
	}
}

func TestIndexRefusesATokenClaimedByTwoSecrets(t *testing.T) {
	ix := NewIndex()
	p := testPayload("n1", "a", "v1", 100)
	if err := ix.Upsert(payloadSecret(t, "n1", payloadName(p), p, "1")); err != nil {
		t.Fatal(err)
	}
	shared := newToken(t)
	for _, name := range []string{"a-token-1", "a-token-2"} {
		if err := ix.Upsert(tokenSecretObj(t, "n1", name, secrets.Token{Pool: "a", Current: shared, RotatedAt: time.Now(), PayloadHash: p.Hash}, "1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := ix.Lookup(shared); ok {
		t.Fatal("a token held by two Secrets resolved")
	}
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "a-token-2"})
	if m, ok := ix.Lookup(shared); !ok || m.Payload == nil {
		t.Fatal("the token did not resolve once only one Secret holds it")
	}
}

func TestIndexUpdatesReplaceWhatASecretContributed(t *testing.T) {
	ix := NewIndex()
	p := testPayload("n1", "a", "v1", 100)
	if err := ix.Upsert(payloadSecret(t, "n1", payloadName(p), p, "1")); err != nil {
		t.Fatal(err)
	}
	t1, t2, t3 := newToken(t), newToken(t), newToken(t)
	tok := secrets.Token{Pool: "a", Current: t1, RotatedAt: time.Now(), PayloadHash: p.Hash}
	upsert := func(tok secrets.Token, rv string) {
		t.Helper()
		if err := ix.Upsert(tokenSecretObj(t, "n1", "a-token", tok, rv)); err != nil {
			t.Fatal(err)
		}
	}
	resolves := func(tokens ...string) {
		t.Helper()
		for _, k := range []string{t1, t2, t3} {
			_, ok := ix.Lookup(k)
			want := false
			for _, w := range tokens {
				want = want || w == k
			}
			if ok != want {
				t.Fatalf("token %d resolves = %v", map[string]int{t1: 1, t2: 2, t3: 3}[k], ok)
			}
		}
	}
	upsert(tok, "1")
	resolves(t1)
	tok = tok.Rotate(t2, time.Now())
	upsert(tok, "2")
	resolves(t1, t2)
	tok = tok.Rotate(t3, time.Now())
	upsert(tok, "3")
	resolves(t2, t3)
	if st := ix.Stats(); st.Tokens != 2 || st.TokenSecrets != 1 || st.PayloadSecrets != 1 {
		t.Fatalf("stats %+v", st)
	}

	// A resync delivers the same resource version: not decoded again.
	stale := tokenSecretObj(t, "n1", "a-token", tok.Rotate(t1, time.Now()), "3")
	if err := ix.Upsert(stale); err != nil {
		t.Fatal(err)
	}
	resolves(t2, t3)

	// Edited into an invalid state: nothing resolves, and it is counted.
	bad := tokenSecretObj(t, "n1", "a-token", tok, "4")
	bad.Data[secrets.KeyPayloadHash] = []byte("nope")
	if err := ix.Upsert(bad); err == nil {
		t.Fatal("an invalid token Secret was accepted")
	}
	resolves()
	if st := ix.Stats(); st.Tokens != 0 || st.Invalid != 1 {
		t.Fatalf("stats %+v", st)
	}
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "a-token"})
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: payloadName(p)})
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "never-seen"})
	if st := ix.Stats(); st != (IndexStats{}) {
		t.Fatalf("stats after deleting everything %+v", st)
	}
}

// TestIndexServesAPayloadFromTheSecretOfItsNameOnly: a copy of a payload
// under another name is refused, and neither its arrival nor its deletion
// changes what the Secret of the payload's name serves.
func TestIndexServesAPayloadFromTheSecretOfItsNameOnly(t *testing.T) {
	ix := NewIndex()
	p := testPayload("n1", "a", "v1", 100)
	if err := ix.Upsert(payloadSecret(t, "n1", "a-payload-copy", p, "1")); err == nil {
		t.Fatal("a copy under another name was indexed")
	}
	if err := ix.Upsert(payloadSecret(t, "n1", payloadName(p), p, "1")); err != nil {
		t.Fatal(err)
	}
	tok := newToken(t)
	if err := ix.Upsert(tokenSecretObj(t, "n1", "a-token", secrets.Token{Pool: "a", Current: tok, RotatedAt: time.Now(), PayloadHash: p.Hash}, "1")); err != nil {
		t.Fatal(err)
	}
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "a-payload-copy"})
	if m, _ := ix.Lookup(tok); m.Payload == nil {
		t.Fatal("the payload went with a copy of another name")
	}
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: payloadName(p)})
	if m, _ := ix.Lookup(tok); m.Payload != nil {
		t.Fatal("the payload outlived its Secret")
	}
}
