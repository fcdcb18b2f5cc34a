package secrets_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// manifestHash is the payload hash of pool and manifest m, as the
// controller computes it.
func manifestHash(pool string, m map[string]string) string {
	byComponent := payload.Manifest{}
	for name, d := range m {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			panic(err)
		}
		byComponent[c] = d
	}
	return payload.HashOf(pool, byComponent)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustToken(t *testing.T) string {
	t.Helper()
	tok, err := secrets.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func validToken(t *testing.T) secrets.Token {
	return secrets.Token{
		Pool:        "workers",
		Current:     mustToken(t),
		RotatedAt:   time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		PayloadHash: hashOf("p1"),
	}
}

func validPayload() secrets.Payload {
	frags := map[string][]byte{
		"release":         []byte(`{"ignition":{"version":"3.5.0"}}`),
		"apiserver-proxy": []byte(`{"ignition":{"version":"3.5.0"},"storage":{}}`),
	}
	m := map[string]string{}
	for c, f := range frags {
		m[c] = digest(f)
	}
	return secrets.Payload{
		Pool:      "workers",
		Hash:      manifestHash("workers", m),
		Ignition:  []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[]}}`),
		Manifest:  m,
		Fragments: frags,
	}
}

func TestGenerateTokenIsValidAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := mustToken(t)
		if !secrets.ValidToken(tok) {
			t.Fatalf("GenerateToken made a token that ValidToken refuses (length %d)", len(tok))
		}
		if seen[tok] {
			t.Fatal("GenerateToken repeated a token")
		}
		seen[tok] = true
	}
}

func TestValidTokenRefusesOtherForms(t *testing.T) {
	good := strings.Repeat("a", secrets.TokenLength)
	for _, s := range []string{"", "abc", good + "a", good[1:], good[1:] + "=", good[1:] + "+", good[1:] + "/", good[1:] + " ", good[1:] + "\x00", good[2:] + "é"} {
		if secrets.ValidToken(s) {
			t.Errorf("ValidToken(%q) = true", s)
		}
	}
	if !secrets.ValidToken(good) || !secrets.ValidToken(strings.Repeat("-_Z9", 10)+"abc") {
		t.Error("ValidToken refuses a well-formed token")
	}
}

func TestTokenSecretRoundTrip(t *testing.T) {
	tok := validToken(t)
	s, err := secrets.NewTokenSecret("team-a", "workers-token-0123", tok)
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels[secrets.LabelPool] != "workers" || s.Labels[secrets.LabelKind] != secrets.KindToken || s.Type != secrets.TypeToken {
		t.Fatalf("labels %v type %q", s.Labels, s.Type)
	}
	if _, ok := s.Data[secrets.KeyPreviousToken]; ok {
		t.Error("a token never rotated has a previous token")
	}
	got, err := secrets.DecodeToken(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tok) {
		t.Fatalf("round trip: got %+v, want %+v", got, tok)
	}

	next := mustToken(t)
	rotated := tok.Rotate(next, tok.RotatedAt.Add(time.Hour))
	if rotated.Current != next || rotated.Previous != tok.Current || !rotated.RotatedAt.Equal(tok.RotatedAt.Add(time.Hour)) {
		t.Fatalf("Rotate: %+v", rotated)
	}
	s, err = secrets.NewTokenSecret("team-a", "workers-token-0123", rotated)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := secrets.DecodeToken(s); err != nil || !reflect.DeepEqual(got, rotated) {
		t.Fatalf("round trip after rotation: %+v, %v", got, err)
	}
}

func TestDecodeTokenSaysWhatIsWrongWithoutQuotingTokens(t *testing.T) {
	secret := func(mut func(*corev1.Secret)) *corev1.Secret {
		s, err := secrets.NewTokenSecret("ns", "n", validToken(t))
		if err != nil {
			t.Fatal(err)
		}
		mut(s)
		return s
	}
	const leaky = "LEAKYLEAKYLEAKYLEAKYLEAKYLEAKYLEAKYLEAKYLEA" // 43 characters
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
		want string
	}{
		{"no kind label", secret(func(s *corev1.Secret) { delete(s.Labels, secrets.LabelKind) }), "is not a token Secret"},
		{"payload kind", secret(func(s *corev1.Secret) { s.Labels[secrets.LabelKind] = secrets.KindPayload }), "is not a token Secret"},
		{"opaque type", secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), "has type"},
		{"no pool", secret(func(s *corev1.Secret) { delete(s.Labels, secrets.LabelPool) }), "label nodepool.dev/pool"},
		{"no token", secret(func(s *corev1.Secret) { delete(s.Data, secrets.KeyToken) }), "token is not a token"},
		{"short token", secret(func(s *corev1.Secret) { s.Data[secrets.KeyToken] = []byte(leaky[:20]) }), "token is not a token"},
		{"token with a space", secret(func(s *corev1.Secret) { s.Data[secrets.KeyToken] = []byte(leaky[:42] + " ") }), "token is not a token"},
		{"bad previous", secret(func(s *corev1.Secret) { s.Data[secrets.KeyPreviousToken] = []byte(leaky + "=") }), "previous-token is not a token"},
		{"no rotation time", secret(func(s *corev1.Secret) { delete(s.Data, secrets.KeyRotatedAt) }), "rotated-at is not set"},
		{"bad rotation time", secret(func(s *corev1.Secret) { s.Data[secrets.KeyRotatedAt] = []byte("yesterday") }), "rotated-at is not an RFC 3339 time"},
		{"no payload hash", secret(func(s *corev1.Secret) { delete(s.Data, secrets.KeyPayloadHash) }), "payload-hash"},
		{"upper-case payload hash", secret(func(s *corev1.Secret) {
			s.Data[secrets.KeyPayloadHash] = []byte(strings.ToUpper(hashOf("x")))
		}), "lowercase hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.DecodeToken(tc.s)
			if err == nil {
				t.Fatal("DecodeToken accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "LEAKY") || strings.Contains(err.Error(), string(tc.s.Data[secrets.KeyToken])) && len(tc.s.Data[secrets.KeyToken]) > 0 {
				t.Errorf("error quotes a token: %q", err)
			}
		})
	}
}

func TestFirstFetch(t *testing.T) {
	s, err := secrets.NewTokenSecret("ns", "n", validToken(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := secrets.FirstFetch(s); ok || err != nil {
		t.Fatalf("a new token Secret has a first fetch: %v %v", ok, err)
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s.Annotations = map[string]string{secrets.AnnotationFirstFetch: secrets.FormatTime(at)}
	if got, ok, err := secrets.FirstFetch(s); !ok || err != nil || !got.Equal(at) {
		t.Fatalf("FirstFetch = %v %v %v", got, ok, err)
	}
	s.Annotations[secrets.AnnotationFirstFetch] = "soon"
	if _, _, err := secrets.FirstFetch(s); err == nil {
		t.Fatal("FirstFetch accepted a malformed time")
	}
}

func TestPayloadSecretRoundTrip(t *testing.T) {
	p := validPayload()
	s, err := secrets.NewPayloadSecret("team-a", secrets.PayloadSecretName(p.Pool, p.Hash), p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Immutable == nil || !*s.Immutable {
		t.Error("a payload Secret is not immutable")
	}
	if s.Labels[secrets.LabelKind] != secrets.KindPayload || s.Labels[secrets.LabelPool] != "workers" ||
		s.Labels[secrets.LabelPayload] != p.Hash[:16] || s.Annotations[secrets.AnnotationPayloadHash] != p.Hash {
		t.Fatalf("labels %v annotations %v", s.Labels, s.Annotations)
	}
	got, err := secrets.DecodePayload(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip: got %+v\nwant %+v", got, p)
	}
	ign, err := secrets.DecodeIgnition(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ign.JSON, p.Ignition) || ign.Pool != p.Pool || ign.Hash != p.Hash || !bytes.Equal(ign.Gzip, s.Data[secrets.KeyIgnition]) {
		t.Fatalf("DecodeIgnition: %+v", ign)
	}
	again, err := secrets.NewPayloadSecret("team-a", secrets.PayloadSecretName(p.Pool, p.Hash), p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, s) {
		t.Error("the same payload gave two different Secrets")
	}
	if secrets.PayloadHashOf(s) != p.Hash {
		t.Error("PayloadHashOf")
	}
}

func TestNewPayloadSecretRefusesInconsistentPayloads(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*secrets.Payload)
		want string
	}{
		{"no pool", func(p *secrets.Payload) { p.Pool = "" }, "label nodepool.dev/pool"},
		{"short hash", func(p *secrets.Payload) { p.Hash = p.Hash[:16] }, "payload hash"},
		{"not JSON", func(p *secrets.Payload) { p.Ignition = []byte("{") }, "ignition.json.gz is not JSON"},
		{"wrong digest", func(p *secrets.Payload) { p.Manifest["release"] = digest([]byte("x")) }, `component "release" has digest`},
		{"fragment without manifest entry", func(p *secrets.Payload) { delete(p.Manifest, "release") }, "is not in manifest.json"},
		{"manifest entry without fragment", func(p *secrets.Payload) { delete(p.Fragments, "release") }, "has no fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPayload()
			tc.mut(&p)
			_, err := secrets.NewPayloadSecret("ns", "n", p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestDecodePayloadSaysWhatIsWrong(t *testing.T) {
	secret := func(mut func(*corev1.Secret)) *corev1.Secret {
		p := validPayload()
		s, err := secrets.NewPayloadSecret("ns", secrets.PayloadSecretName(p.Pool, p.Hash), p)
		if err != nil {
			t.Fatal(err)
		}
		mut(s)
		return s
	}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range secrets.MaxDecompressedSize>>20 + 1 {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	truncated := secret(func(*corev1.Secret) {}).Data[secrets.KeyIgnition]
	truncated = truncated[:len(truncated)-6]
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
		want string
	}{
		{"token kind", secret(func(s *corev1.Secret) { s.Labels[secrets.LabelKind] = secrets.KindToken }), "is not a payload Secret"},
		{"opaque", secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), "has type"},
		{"no hash", secret(func(s *corev1.Secret) { delete(s.Annotations, secrets.AnnotationPayloadHash) }), "annotation nodepool.dev/payload-hash"},
		{"label disagrees", secret(func(s *corev1.Secret) { s.Labels[secrets.LabelPayload] = "0000000000000000" }), "label nodepool.dev/payload is"},
		{"no ignition", secret(func(s *corev1.Secret) { delete(s.Data, secrets.KeyIgnition) }), "key ignition.json.gz is missing"},
		{"not gzip", secret(func(s *corev1.Secret) { s.Data[secrets.KeyIgnition] = []byte(`{}`) }), "not gzip"},
		{"truncated gzip", secret(func(s *corev1.Secret) { s.Data[secrets.KeyIgnition] = truncated }), "corrupt gzip"},
		{"gzip bomb", secret(func(s *corev1.Secret) { s.Data[secrets.KeyIgnition] = bomb.Bytes() }), "inflates to more than"},
		{"gzip of not JSON", secret(func(s *corev1.Secret) { s.Data[secrets.KeyIgnition] = secrets.Gzip([]byte("{")) }), "does not inflate to JSON"},
		{"bad manifest", secret(func(s *corev1.Secret) { s.Data[secrets.KeyManifest] = []byte("[]") }), "manifest.json is not a JSON object"},
		{"bad fragments", secret(func(s *corev1.Secret) { s.Data[secrets.KeyFragments] = secrets.Gzip([]byte("null")) }), "fragments.json.gz is not a JSON object"},
		{"fragments disagree", secret(func(s *corev1.Secret) {
			s.Data[secrets.KeyFragments] = secrets.Gzip([]byte(`{"release":{},"apiserver-proxy":{}}`))
		}), "has digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.DecodePayload(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSelectorMatchesBothKindsOnly(t *testing.T) {
	sel := secrets.Selector()
	for kind, want := range map[string]bool{secrets.KindToken: true, secrets.KindPayload: true, "userdata": false, "": false} {
		set := map[string]string{}
		if kind != "" {
			set[secrets.LabelKind] = kind
		}
		if got := sel.Matches(labels.Set(set)); got != want {
			t.Errorf("kind %q: matches = %v", kind, got)
		}
	}
}

// TestAPayloadSecretIsNeverLargerThanItsBound: whatever gzip makes of a
// payload, tiny or past the Secret limit, compressible or random, its
// Secret's data is within PayloadDataBound, and the bound of a small
// payload is close to its size (so it is of use).
func TestAPayloadSecretIsNeverLargerThanItsBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	random := func(n int) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, n := range []int{0, 10, 1 << 10, 70 << 10, 1 << 20, 3 << 20} {
		for _, kind := range []string{"random", "repeated"} {
			body := strings.Repeat("a", n)
			if kind == "random" {
				body = random(n)
			}
			frag := []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,` + body + `"}}]}}`)
			m := map[string]string{"user-configs": digest(frag), "release": digest([]byte(`{}`))}
			p := secrets.Payload{Pool: "workers", Hash: manifestHash("workers", m), Ignition: frag, Manifest: m,
				Fragments: map[string][]byte{"user-configs": frag, "release": []byte(`{}`)}}
			s, err := secrets.NewPayloadSecret("team-a", secrets.PayloadSecretName(p.Pool, p.Hash), p)
			if err != nil {
				t.Fatal(err)
			}
			bound := secrets.PayloadDataBound(p)
			if got := secrets.DataBytes(s); got > bound {
				t.Errorf("%s %d bytes: the Secret holds %d bytes, above its bound %d", kind, n, got, bound)
			}
			if raw := 2 * len(frag); bound > raw+raw/100+1024 {
				t.Errorf("%s %d bytes: bound %d, far above the %d bytes uncompressed", kind, n, bound, raw)
			}
		}
	}
}
