package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// tokenBytes is the entropy of a token: 256 bits.
const tokenBytes = 32

// TokenLength is the length of a token made by GenerateToken: 32 random
// bytes in unpadded base64url.
const TokenLength = 43

// GenerateToken returns a new random token: 32 bytes from crypto/rand in
// unpadded base64url, usable as is in "Authorization: Bearer <token>".
func GenerateToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidToken says whether s has the form of a token made by GenerateToken
// (the form only: whether it is a token of some pool is the index's
// business).
func ValidToken(s string) bool {
	if len(s) != TokenLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// Token is the content of a token Secret: the tokens a pool's machines
// present to the payload server and the payload they receive.
type Token struct {
	// Pool is the NodePool's name (label LabelPool).
	Pool string
	// Current is the token the user-data carries now.
	Current string
	// Previous is the token before the last rotation, still accepted; empty
	// before the first rotation.
	Previous string
	// RotatedAt is when Current was generated.
	RotatedAt time.Time
	// PayloadHash is the payload the tokens serve (the payload pointer).
	PayloadHash string
	// RolloutHash is the rollout the token belongs to (annotation
	// AnnotationRolloutHash; "" leaves it unset).
	RolloutHash string
}

// Rotate returns t with next as the current token and the current one kept
// as previous; the token before that stops working.
func (t Token) Rotate(next string, now time.Time) Token {
	t.Previous, t.Current, t.RotatedAt = t.Current, next, now
	return t
}

// Validate reports what is wrong with t, if anything. Error messages never
// contain a token.
func (t Token) Validate() error {
	var errs []error
	if err := validatePool(t.Pool); err != nil {
		errs = append(errs, err)
	}
	if !ValidToken(t.Current) {
		errs = append(errs, fmt.Errorf("%s is not a token made by GenerateToken (%d base64url characters)", KeyToken, TokenLength))
	}
	if t.Previous != "" && !ValidToken(t.Previous) {
		errs = append(errs, fmt.Errorf("%s is not a token made by GenerateToken (%d base64url characters)", KeyPreviousToken, TokenLength))
	}
	if t.RotatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%s is not set", KeyRotatedAt))
	}
	if err := ValidateHash(t.PayloadHash); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", KeyPayloadHash, err))
	}
	return errors.Join(errs...)
}

// NewTokenSecret returns the token Secret namespace/name holding t. The
// name is the caller's ("<pool>-token-<rollout hash>").
func NewTokenSecret(namespace, name string, t Token) (*corev1.Secret, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("token Secret %s/%s: %w", namespace, name, err)
	}
	data := map[string][]byte{
		KeyToken:       []byte(t.Current),
		KeyRotatedAt:   []byte(t.RotatedAt.UTC().Format(time.RFC3339)),
		KeyPayloadHash: []byte(t.PayloadHash),
	}
	if t.Previous != "" {
		data[KeyPreviousToken] = []byte(t.Previous)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{LabelPool: t.Pool, LabelKind: KindToken},
		},
		Type: TypeToken,
		Data: data,
	}
	if t.RolloutHash != "" {
		s.Annotations = map[string]string{AnnotationRolloutHash: t.RolloutHash}
	}
	return s, nil
}

// DecodeToken reads a token Secret. It fails, saying which label or key is
// wrong and never quoting a token, unless s is a complete token Secret.
func DecodeToken(s *corev1.Secret) (Token, error) {
	if err := checkKind(s, KindToken, TypeToken); err != nil {
		return Token{}, err
	}
	pool := s.Labels[LabelPool]
	if IsMirror(s) {
		pool = s.Labels[LabelMirrorPool]
	}
	t := Token{
		Pool:        pool,
		Current:     string(s.Data[KeyToken]),
		Previous:    string(s.Data[KeyPreviousToken]),
		PayloadHash: string(s.Data[KeyPayloadHash]),
		RolloutHash: s.Annotations[AnnotationRolloutHash],
	}
	var errs []error
	if raw, ok := s.Data[KeyRotatedAt]; ok {
		at, err := time.Parse(time.RFC3339, string(raw))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not an RFC 3339 time", KeyRotatedAt))
		}
		t.RotatedAt = at
	}
	if err := t.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Token{}, fmt.Errorf("token Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return t, nil
}

// FirstFetch returns the time of the first fetch recorded on a token Secret
// (AnnotationFirstFetch), and false when none is recorded yet.
func FirstFetch(s *corev1.Secret) (time.Time, bool, error) {
	raw, ok := s.Annotations[AnnotationFirstFetch]
	if !ok {
		return time.Time{}, false, nil
	}
	at, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("token Secret %s/%s: annotation %s=%q is not an RFC 3339 time", s.Namespace, s.Name, AnnotationFirstFetch, raw)
	}
	return at, true, nil
}

// FormatTime is how times are written in token Secrets: RFC 3339, UTC, to
// the second.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ValidateHash checks that h has the form of a payload hash (lowercase hex
// sha256).
func ValidateHash(h string) error {
	if len(h) != HashLength {
		return fmt.Errorf("want a hex sha256 of %d characters, got %d characters", HashLength, len(h))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("want a lowercase hex sha256, got a %q at offset %d", c, i)
		}
	}
	return nil
}

func validatePool(pool string) error {
	if pool == "" {
		return fmt.Errorf("label %s (the pool's name) is not set", LabelPool)
	}
	if errs := validation.IsValidLabelValue(pool); len(errs) > 0 {
		return fmt.Errorf("label %s=%q is not a pool name: %s", LabelPool, pool, errs[0])
	}
	return nil
}

// checkKind checks the kind label and type of s, so a decoder reports "this
// is not a token Secret" rather than a list of missing keys.
func checkKind(s *corev1.Secret, kind string, typ corev1.SecretType) error {
	if s == nil {
		return fmt.Errorf("no Secret")
	}
	if got := ServedKind(s); got != kind {
		return fmt.Errorf("Secret %s/%s is not a %s Secret: label %s is %q, want %q", s.Namespace, s.Name, kind, LabelKind, got, kind)
	}
	if s.Type != typ {
		return fmt.Errorf("Secret %s/%s has type %q, want %q", s.Namespace, s.Name, s.Type, typ)
	}
	return nil
}
