package secrets_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/secrets"
)

// genuinePayloadSecret is validPayload's Secret as the controller writes it:
// named for its pool and hash.
func genuinePayloadSecret(t *testing.T) (*corev1.Secret, secrets.Payload) {
	t.Helper()
	p := validPayload()
	s, err := secrets.NewPayloadSecret("team-a", secrets.PayloadSecretName(p.Pool, p.Hash), p)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// withEvilFragment gives s other fragments and a manifest that matches
// them, keeping the hash it claims: what a forger who can create Secrets
// writes.
func withEvilFragment(t *testing.T, s *corev1.Secret, p secrets.Payload) {
	t.Helper()
	evil := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/evil"}]}}`)
	frags := map[string]json.RawMessage{}
	manifest := map[string]string{}
	for c, f := range p.Fragments {
		frags[c], manifest[c] = f, digest(f)
	}
	frags["release"], manifest["release"] = evil, digest(evil)
	rawFrags, _ := json.Marshal(frags)
	rawManifest, _ := json.Marshal(manifest)
	s.Data[secrets.KeyFragments], s.Data[secrets.KeyManifest] = secrets.Gzip(rawFrags), rawManifest
}

func TestAPayloadSecretWhoseManifestDoesNotGiveItsHashIsRefused(t *testing.T) {
	s, p := genuinePayloadSecret(t)
	if _, err := secrets.DecodePayload(s); err != nil {
		t.Fatalf("the genuine Secret: %v", err)
	}
	if _, _, _, err := secrets.ToManifest(s); err != nil {
		t.Fatalf("the genuine Secret's manifest: %v", err)
	}
	withEvilFragment(t, s, p)
	_, err := secrets.DecodePayload(s)
	if got := secrets.RefusalReason(err); got != secrets.RefusedHashMismatch || !strings.Contains(err.Error(), "hash to") {
		t.Fatalf("DecodePayload of consistent fragments under another payload's hash: reason %q, error %v", got, err)
	}
	if strings.Contains(err.Error(), "/etc/evil") {
		t.Errorf("the refusal quotes the Secret's content: %v", err)
	}
	_, _, _, err = secrets.ToManifest(s)
	if got := secrets.RefusalReason(err); got != secrets.RefusedHashMismatch {
		t.Fatalf("ToManifest (the memo's path) of a manifest that does not give the hash: reason %q, error %v", got, err)
	}
}

func TestAPayloadSecretNotNamedForItsHashIsRefused(t *testing.T) {
	s, _ := genuinePayloadSecret(t)
	s.Name = "aaaa-copy"
	_, err := secrets.DecodePayload(s)
	if got := secrets.RefusalReason(err); got != secrets.RefusedNameMismatch || !strings.Contains(err.Error(), secrets.PayloadSecretName("workers", validPayload().Hash)) {
		t.Fatalf("DecodePayload of a genuine payload under another name: reason %q, error %v", got, err)
	}
	if _, _, _, err := secrets.ToManifest(s); secrets.RefusalReason(err) != secrets.RefusedNameMismatch {
		t.Fatalf("ToManifest of a genuine payload under another name: %v", err)
	}
	if err := secrets.CheckPayloadName(s); secrets.RefusalReason(err) != secrets.RefusedNameMismatch {
		t.Fatalf("CheckPayloadName: %v", err)
	}
	s.Name = secrets.PayloadSecretName("workers", validPayload().Hash)
	if err := secrets.CheckPayloadName(s); err != nil {
		t.Fatalf("CheckPayloadName of the right name: %v", err)
	}
}

func TestEveryRefusalHasAReason(t *testing.T) {
	if got := secrets.RefusalReason(errors.New("x")); got != secrets.RefusedInvalid {
		t.Errorf("an error of no reason: %q", got)
	}
	if got := secrets.RefusalReason(nil); got != "" {
		t.Errorf("no error: %q", got)
	}
	s, _ := genuinePayloadSecret(t)
	s.Type = corev1.SecretTypeOpaque
	if _, err := secrets.DecodePayload(s); secrets.RefusalReason(err) != secrets.RefusedInvalid {
		t.Errorf("an opaque Secret: %v", err)
	}
	for _, r := range []string{secrets.RefusedInvalid, secrets.RefusedNameMismatch, secrets.RefusedContentMismatch, secrets.RefusedHashMismatch, secrets.RefusedNotOwned} {
		found := false
		for _, l := range secrets.RefusedReasons {
			found = found || l == r
		}
		if !found {
			t.Errorf("reason %s is not in RefusedReasons", r)
		}
	}
}
