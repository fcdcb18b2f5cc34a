package secrets

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// What makes a payload Secret one the controller may use. Labels,
// annotations and an owner reference prove nothing: anyone who can create
// Secrets in the namespace can copy them. What does:
//
//   - its name is the one the controller gives the payload it claims,
//     PayloadSecretName(pool, hash): names are unique in a namespace, so no
//     other Secret claiming that payload is ever read;
//   - its manifest gives that hash for its pool, and its fragments have the
//     manifest's digests: a Secret passing both is, in what the controller
//     reads of it, a copy of the genuine payload of that hash (forging one
//     means finding a sha256 collision).
//
// A Secret failing either is refused, with one of these reasons (the
// values of the "reason" label of nodepool_payload_refused_total).
const (
	// RefusedInvalid: a label, annotation or key is missing or malformed.
	RefusedInvalid = "invalid"
	// RefusedNameMismatch: the Secret is not named for the payload it
	// claims.
	RefusedNameMismatch = "name_mismatch"
	// RefusedContentMismatch: its fragments do not match its manifest.
	RefusedContentMismatch = "content_mismatch"
	// RefusedHashMismatch: its pool and manifest do not give the hash it
	// claims.
	RefusedHashMismatch = "hash_mismatch"
	// RefusedNotOwned: it has the name of one of the pool's payloads but
	// the pool is not its controller.
	RefusedNotOwned = "not_owned"
)

// RefusedReasons lists every reason, so a metric starts at 0 for each.
var RefusedReasons = []string{RefusedInvalid, RefusedNameMismatch, RefusedContentMismatch, RefusedHashMismatch, RefusedNotOwned, RefusedUnboundToken}

// RefusedError says why a payload Secret is not used. Its message names
// the Secret and what is wrong with it, never its content.
type RefusedError struct {
	// Secret is the refused Secret; zero when Err names it itself.
	Secret types.NamespacedName
	Reason string
	// Err is what is wrong with the Secret.
	Err error
}

func (e *RefusedError) Error() string {
	if e.Secret == (types.NamespacedName{}) {
		return e.Err.Error()
	}
	return fmt.Sprintf("payload Secret %s: %v", e.Secret, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// refused is a RefusedError about payload Secret s.
func refused(s *corev1.Secret, reason string, err error) error {
	return &RefusedError{Secret: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, Reason: reason, Err: err}
}

// RefusalReason is the reason of a refusal, RefusedInvalid for an error
// of none, "" for no error.
func RefusalReason(err error) string {
	if err == nil {
		return ""
	}
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Reason
	}
	return RefusedInvalid
}

// CheckPayloadName checks, without reading its data, that payload Secret
// s claims a payload hash and has the name the controller gives that
// payload of its pool label's pool.
func CheckPayloadName(s *corev1.Secret) error {
	pool, hash := s.Labels[LabelPool], s.Annotations[AnnotationPayloadHash]
	if err := ValidateHash(hash); err != nil {
		return refused(s, RefusedInvalid, fmt.Errorf("annotation %s: %w", AnnotationPayloadHash, err))
	}
	if want := PayloadSecretName(pool, hash); s.Name != want {
		return refused(s, RefusedNameMismatch, fmt.Errorf("claims payload %s of pool %s, which only a Secret named %s holds", payload.Short(hash), pool, want))
	}
	return nil
}

// checkPayloadHash checks that pool and manifest give hash.
func checkPayloadHash(s *corev1.Secret, pool, hash string, manifest map[string]string) error {
	m := make(payload.Manifest, len(manifest))
	for name, d := range manifest {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return refused(s, RefusedInvalid, fmt.Errorf("%s: %w", KeyManifest, err))
		}
		m[c] = d
	}
	if got := payload.HashOf(pool, m); got != hash {
		return refused(s, RefusedHashMismatch, fmt.Errorf("its pool and %s hash to %s, annotation %s says %s", KeyManifest, payload.Short(got), AnnotationPayloadHash, payload.Short(hash)))
	}
	return nil
}
