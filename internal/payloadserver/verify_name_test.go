//go:build !fuzzonly

package payloadserver

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/util/uuid"

	"nodepool.dev/nodepool/internal/secrets"
)

// TestAPayloadSecretNotNamedForItsHashIsNotServed: only the Secret of the
// name the controller gives a payload (names are unique in a namespace)
// can hold it; a genuine payload copied under another name, with the
// pool's controller reference, is refused by name.
func TestAPayloadSecretNotNamedForItsHashIsNotServed(t *testing.T) {
	p := testPayload("n1", "workers", "v1", 0)
	uid := uuid.NewUUID()
	right := payloadSecret(t, "n1", secrets.PayloadSecretName(p.Pool, p.Hash), p, "1")
	controlledBy(right, p.Pool, uid)
	if _, err := verifyPayload(right, 1<<20); err != nil {
		t.Fatalf("the payload Secret of the right name: %v", err)
	}
	copied := right.DeepCopy()
	copied.Name = "aaaa-payload"
	_, err := verifyPayload(copied, 1<<20)
	var ign *IgnoredError
	if !errors.As(err, &ign) || ign.Reason != ReasonNameMismatch {
		t.Fatalf("a genuine payload under another name: %v, want %s", err, ReasonNameMismatch)
	}
	ix := NewIndex()
	if err := ix.Upsert(copied); err == nil {
		t.Fatal("the index took a payload Secret not named for its hash")
	}
	if st := ix.Stats(); st.PayloadSecrets != 0 {
		t.Fatalf("index stats %+v after a misnamed payload Secret", st)
	}
}
