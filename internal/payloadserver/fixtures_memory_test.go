package payloadserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

// memPool is a pool fed to an Index in memory, without an API server.
type memPool struct {
	ns, name string
	token    string
	payload  secrets.Payload
}

// Fixed tokens (the form of secrets.GenerateToken) so seeds of the fuzz
// corpus can carry valid ones.
const (
	fuzzTokenA       = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	fuzzTokenB       = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	fuzzTokenB2      = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b"
	fuzzTokenNoPay   = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
	fuzzTokenRemoved = "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
)

// memIndex returns an index holding pool a (namespace n1), pool b
// (namespace n2, rotated once: two tokens), a token Secret whose payload is
// missing, and none for fuzzTokenRemoved (indexed, then deleted).
func memIndex(t testing.TB) (*Index, map[string]memPool) {
	t.Helper()
	ix := NewIndex()
	pools := map[string]memPool{}
	add := func(ns, pool, token, previous string, withPayload bool) {
		p := testPayload(ns, pool, "v1", 2<<10)
		if withPayload {
			s, err := secrets.NewPayloadSecret(ns, payloadName(p), p)
			if err != nil {
				t.Fatal(err)
			}
			s.ResourceVersion = "1"
			if err := ix.Upsert(s); err != nil {
				t.Fatal(err)
			}
		}
		s, err := secrets.NewTokenSecret(ns, pool+"-token", secrets.Token{
			Pool: pool, Current: token, Previous: previous, RotatedAt: time.Unix(1e9, 0), PayloadHash: p.Hash,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.UID = types.UID(ns + "/" + pool)
		s.ResourceVersion = "1"
		if err := ix.Upsert(s); err != nil {
			t.Fatal(err)
		}
		if withPayload {
			pools[token] = memPool{ns: ns, name: pool, token: token, payload: p}
			if previous != "" {
				pools[previous] = pools[token]
			}
		}
	}
	add("n1", "a", fuzzTokenA, "", true)
	add("n2", "b", fuzzTokenB2, fuzzTokenB, true)
	add("n1", "no-payload", fuzzTokenNoPay, "", false)
	add("n1", "removed", fuzzTokenRemoved, "", true)
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "removed-token"})
	delete(pools, fuzzTokenRemoved)
	return ix, pools
}

func tokenSecretObj(t testing.TB, ns, name string, tok secrets.Token, rv string) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewTokenSecret(ns, name, tok)
	if err != nil {
		t.Fatal(err)
	}
	s.UID = types.UID(ns + "/" + name)
	s.ResourceVersion = rv
	return s
}

func payloadSecret(t testing.TB, ns, name string, p secrets.Payload, rv string) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewPayloadSecret(ns, name, p)
	if err != nil {
		t.Fatal(err)
	}
	s.ResourceVersion = rv
	return s
}
