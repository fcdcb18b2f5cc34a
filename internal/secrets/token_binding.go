package secrets

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Which token Secrets the controller wrote. A token Secret's name, labels
// and controller reference prove nothing: anyone who can create Secrets in
// a pool's namespace can make one under the name the controller gives a
// token, with a token of their choosing. Unlike a payload, a token cannot
// be checked against its content (it is a random value). So the controller
// binds each token Secret it writes to itself: the annotation
// AnnotationTokenBinding is an HMAC-SHA256, under a key only the controller
// holds (the Secret TokenKeyName in its namespace), of the Secret's
// namespace, name, pool, tokens, payload and rollout hashes. A token
// Secret whose binding does not verify was not written by the controller:
// it is refused (RefusedUnboundToken), never read as the pool's, mirrored
// or served.
//
// Why a binding and not a list of the UIDs the controller created: the
// binding is written in the same request as the token, so no crash between
// two writes can leave a genuine token unrecorded, and it needs no field of
// the NodePool (no status growing with every rollout, no write per token).
const (
	// AnnotationTokenBinding is the binding of a token Secret: "v1:" and
	// the unpadded base64url HMAC-SHA256 of what it binds.
	AnnotationTokenBinding = "nodepool.dev/token-binding"
	// TokenKeyName is the Secret, in the controller's namespace, holding
	// the key of the bindings (data key KeyTokenKey).
	TokenKeyName = "nodepool-token-key"
	// KeyTokenKey is the key's data key: 32 random bytes.
	KeyTokenKey = "key"
	// RefusedUnboundToken: a token Secret under the name the controller
	// gives a token whose binding does not verify (made by someone else).
	RefusedUnboundToken = "unbound_token"
)

// tokenBindingVersion prefixes a binding, so another construction can be
// told from this one.
const tokenBindingVersion = "v1:"

// TokenKeyBytes is the size of a binding key.
const TokenKeyBytes = 32

// NewTokenKey returns the Secret namespace/TokenKeyName holding a new
// random key.
func NewTokenKey(namespace string) (*corev1.Secret, error) {
	key := make([]byte, TokenKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating the token binding key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: TokenKeyName,
			Annotations: map[string]string{"nodepool.dev/description": "the key binding the pools' token Secrets to the controller that wrote them; copy it to a management cluster pools move to"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{KeyTokenKey: key},
	}, nil
}

// TokenKeyOf reads the key of Secret s (TokenKeyName).
func TokenKeyOf(s *corev1.Secret) ([]byte, error) {
	key := s.Data[KeyTokenKey]
	if len(key) < TokenKeyBytes {
		return nil, fmt.Errorf("Secret %s/%s: key %s holds %d bytes, want at least %d", s.Namespace, s.Name, KeyTokenKey, len(key), TokenKeyBytes)
	}
	return key, nil
}

// tokenBinding is the binding of token Secret s under key.
func tokenBinding(key []byte, s *corev1.Secret) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{
		"nodepool.dev token Secret", s.Namespace, s.Name, s.Labels[LabelPool],
		string(s.Data[KeyToken]), string(s.Data[KeyPreviousToken]), string(s.Data[KeyPayloadHash]), s.Annotations[AnnotationRolloutHash],
	} {
		// Length-prefixed: no two sequences of parts write the same bytes.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		mac.Write(n[:])
		mac.Write([]byte(part))
	}
	return tokenBindingVersion + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// BindToken sets the binding of token Secret s (its annotation
// AnnotationTokenBinding) under key, from what s holds now: call it after
// the last change of its name, pool label, data or rollout hash.
func BindToken(s *corev1.Secret, key []byte) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationTokenBinding] = tokenBinding(key, s)
}

// TokenBound reports whether token Secret s carries the binding of what it
// holds under key: whether the holder of key wrote it as it is. The
// bindings are compared in constant time.
func TokenBound(s *corev1.Secret, key []byte) bool {
	got := s.Annotations[AnnotationTokenBinding]
	if got == "" || len(key) == 0 {
		return false
	}
	return hmac.Equal([]byte(got), []byte(tokenBinding(key, s)))
}

// UnboundTokenError refuses token Secret s: its binding does not verify.
func UnboundTokenError(s *corev1.Secret) error {
	why := "its annotation " + AnnotationTokenBinding + " is not the controller's binding of what it holds"
	if s.Annotations[AnnotationTokenBinding] == "" {
		why = "it has no annotation " + AnnotationTokenBinding
	}
	return &RefusedError{Reason: RefusedUnboundToken, Err: fmt.Errorf(
		"not written by the controller (%s): its tokens are never mirrored or served", why)}
}
