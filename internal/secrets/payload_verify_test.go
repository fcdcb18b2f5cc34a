package secrets_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"nodepool.dev/nodepool/internal/secrets"
)

func TestVerifyPayloadRefusesABombAsTooLargeWithinTheBound(t *testing.T) {
	s, _ := genuinePayloadSecret(t)
	s.Data[secrets.KeyIgnition] = secrets.Gzip(bytes.Repeat([]byte("x"), 8<<20))
	_, err := secrets.VerifyPayload(s, 1<<20)
	if got := secrets.RefusalReason(err); got != secrets.RefusedTooLarge || !errors.Is(err, secrets.ErrTooLarge) {
		t.Fatalf("an Ignition config inflating to 8 MiB under a 1 MiB bound: reason %q, error %v", got, err)
	}
	if !strings.Contains(err.Error(), "payload Secret team-a/"+s.Name) {
		t.Errorf("the refusal does not name the Secret: %v", err)
	}
	if !slices.Contains(secrets.VerifyReasons, secrets.RefusedTooLarge) {
		t.Errorf("VerifyReasons %v lacks %s", secrets.VerifyReasons, secrets.RefusedTooLarge)
	}
}

func TestVerifyPayloadRefusesAnotherTypeAsInvalid(t *testing.T) {
	s, _ := genuinePayloadSecret(t)
	s.Type = "Opaque"
	if _, err := secrets.VerifyPayload(s, 1<<20); secrets.RefusalReason(err) != secrets.RefusedInvalid {
		t.Fatalf("an Opaque Secret: %v", err)
	}
	if _, err := secrets.VerifyPayloadHeader(s, 1<<20); secrets.RefusalReason(err) != secrets.RefusedInvalid {
		t.Fatalf("an Opaque Secret's header: %v", err)
	}
}

func TestInflateStopsAtItsBoundAndRefusesASecondMember(t *testing.T) {
	if out, err := secrets.Inflate(secrets.Gzip([]byte(`{}`)), 2); err != nil || string(out) != `{}` {
		t.Fatalf("within the bound: %q, %v", out, err)
	}
	if _, err := secrets.Inflate(secrets.Gzip([]byte(`{}`)), 1); !errors.Is(err, secrets.ErrTooLarge) {
		t.Fatalf("past the bound: %v", err)
	}
	two := append(secrets.Gzip([]byte(`{}`)), secrets.Gzip([]byte(`{"forged":true}`))...)
	if _, err := secrets.Gunzip(two); err == nil {
		t.Fatal("Gunzip read one member and ignored the second")
	}
}
