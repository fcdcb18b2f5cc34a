package secrets

import (
	"strings"
	"testing"
	"time"
)

// A binding verifies only under the key that made it and for exactly what
// the token Secret held then: its name, pool, tokens, payload and rollout.
func TestATokenBindingVerifiesOnlyWhatTheKeyHolderWrote(t *testing.T) {
	key := []byte(strings.Repeat("k", TokenKeyBytes))
	other := []byte(strings.Repeat("o", TokenKeyBytes))
	tok, err := GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewTokenSecret("team-a", "workers-token-abc", Token{Pool: "workers", Current: tok, RotatedAt: time.Now(), PayloadHash: strings.Repeat("a", HashLength), RolloutHash: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if TokenBound(s, key) {
		t.Fatal("a token Secret without a binding verifies")
	}
	BindToken(s, key)
	if !TokenBound(s, key) {
		t.Fatal("the key holder's own binding does not verify")
	}
	if TokenBound(s, other) {
		t.Error("a binding verifies under another key")
	}
	if TokenBound(s, nil) {
		t.Error("a binding verifies under no key")
	}
	next, _ := GenerateToken()
	for what, edit := range map[string]func(c *map[string]string, d map[string][]byte) string{
		"token":    func(_ *map[string]string, d map[string][]byte) string { d[KeyToken] = []byte(next); return "" },
		"previous": func(_ *map[string]string, d map[string][]byte) string { d[KeyPreviousToken] = []byte(next); return "" },
		"payload hash": func(_ *map[string]string, d map[string][]byte) string {
			d[KeyPayloadHash] = []byte(strings.Repeat("b", HashLength))
			return ""
		},
		"rollout hash": func(a *map[string]string, _ map[string][]byte) string { (*a)[AnnotationRolloutHash] = "abd"; return "" },
		"name":         func(_ *map[string]string, _ map[string][]byte) string { return "workers-token-abd" },
		"namespace":    func(_ *map[string]string, _ map[string][]byte) string { return "ns:team-b" },
		"pool":         func(a *map[string]string, _ map[string][]byte) string { return "pool:other" },
	} {
		c := s.DeepCopy()
		switch r := edit(&c.Annotations, c.Data); {
		case strings.HasPrefix(r, "ns:"):
			c.Namespace = strings.TrimPrefix(r, "ns:")
		case strings.HasPrefix(r, "pool:"):
			c.Labels[LabelPool] = strings.TrimPrefix(r, "pool:")
		case r != "":
			c.Name = r
		}
		if TokenBound(c, key) {
			t.Errorf("the binding still verifies with its %s changed", what)
		}
	}
	// What a forger sees of an error: no token.
	if msg := UnboundTokenError(s).Error(); strings.Contains(msg, tok) || !strings.Contains(msg, AnnotationTokenBinding) {
		t.Errorf("UnboundTokenError: %q: want the annotation named and no token", msg)
	}
	if RefusalReason(UnboundTokenError(s)) != RefusedUnboundToken {
		t.Errorf("reason %q, want %q", RefusalReason(UnboundTokenError(s)), RefusedUnboundToken)
	}
}
