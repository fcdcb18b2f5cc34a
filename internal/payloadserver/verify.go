package payloadserver

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

// Reasons a payload Secret is not served, the values of the "reason" label
// of nodepool_payload_server_ignored_payloads_total. The Secret's own
// faults are secrets.VerifyPayload's reasons; the last three are the
// index's.
const (
	// ReasonInvalid: a label, annotation or key is missing or malformed.
	ReasonInvalid = secrets.RefusedInvalid
	// ReasonTooLarge: the Ignition config or the fragments inflate past the
	// size limit (inflation stops at the limit).
	ReasonTooLarge = secrets.RefusedTooLarge
	// ReasonNotOwned: the Secret's controller is not the NodePool its pool
	// label names.
	ReasonNotOwned = secrets.RefusedNotOwned
	// ReasonHashMismatch: the payload hash recomputed from the pool and the
	// manifest is not the one the Secret claims.
	ReasonHashMismatch = secrets.RefusedHashMismatch
	// ReasonContentMismatch: the fragments do not match the manifest, or do
	// not compose into the Ignition config the Secret holds.
	ReasonContentMismatch = secrets.RefusedContentMismatch
	// ReasonNameMismatch: the Secret's content is a payload of its pool,
	// but its name is not the one the controller gives that payload
	// (secrets.PayloadSecretName): only the Secret of that name, unique in
	// its namespace, is served.
	ReasonNameMismatch = secrets.RefusedNameMismatch
	// ReasonOwnerMismatch: the Secret is controlled by another incarnation
	// of the pool than the token Secret asking for its hash (a different
	// NodePool UID), or one of them has a controller and the other none.
	ReasonOwnerMismatch = "owner_mismatch"
	// ReasonPoolLimit: the pool has as many payloads indexed as the limit.
	ReasonPoolLimit = "pool_limit"
	// ReasonIndexFull: indexing the payload would exceed the index's byte
	// budget.
	ReasonIndexFull = "index_full"
	// ReasonNamespaceFull: indexing the payload would take its namespace
	// past its share of the index's byte budget.
	ReasonNamespaceFull = "namespace_full"
)

// IgnoredReasons lists every reason, so the metric starts at 0 for each.
var IgnoredReasons = append(slices.Clone(secrets.VerifyReasons), ReasonOwnerMismatch, ReasonPoolLimit, ReasonIndexFull, ReasonNamespaceFull)

// IgnoredError says why a payload Secret is not served. Its message names
// the Secret and what is wrong, never payload content.
type IgnoredError struct {
	Secret types.NamespacedName
	Reason string
	Err    error
}

func (e *IgnoredError) Error() string {
	return fmt.Sprintf("payload Secret %s not served (%s): %v", e.Secret, e.Reason, e.Err)
}

func (e *IgnoredError) Unwrap() error { return e.Err }

// verifyPayload is secrets.VerifyPayload, as the entry to index: only a
// payload Secret that is exactly what the controller writes for its pool
// and hash, under the name it gives it, is served.
func verifyPayload(s *corev1.Secret, maxBytes int) (*payloadEntry, error) {
	v, err := secrets.VerifyPayload(s, maxBytes)
	return entryOf(s, v, err)
}

// payloadHeader is secrets.VerifyPayloadHeader, as the entry to index, for
// a Secret verifyPayload accepted before its fragments were dropped.
func payloadHeader(s *corev1.Secret, maxBytes int) (*payloadEntry, error) {
	v, err := secrets.VerifyPayloadHeader(s, maxBytes)
	return entryOf(s, v, err)
}

// entryOf is the entry to index for a verified payload Secret, or why it
// is not served.
func entryOf(s *corev1.Secret, v secrets.Verified, err error) (*payloadEntry, error) {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if err != nil {
		cause := err
		var r *secrets.RefusedError
		if errors.As(err, &r) {
			cause = r.Err
		}
		return nil, &IgnoredError{Secret: name, Reason: secrets.RefusalReason(err), Err: cause}
	}
	return &payloadEntry{
		key:             payloadKey{namespace: v.Origin.Namespace, pool: v.Pool, hash: v.Hash},
		secret:          name,
		resourceVersion: s.ResourceVersion,
		owner:           v.Owner,
		payload:         &Payload{JSON: v.JSON, Gzip: v.Gzip},
		bytes:           int64(len(v.JSON) + len(v.Gzip)),
	}, nil
}

// TransformSecret is the informer's transform: it keeps of a Secret only
// what the index reads (identity, labels, nodepool annotations, owner
// references, and the data keys of its kind), so the cache holds no
// managed fields, no last-applied-configuration copy and no extra keys.
func TransformSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	for k := range s.Annotations {
		if k != secrets.AnnotationPayloadHash && k != secrets.AnnotationFirstFetch && k != secrets.AnnotationMirrorPoolUID {
			delete(s.Annotations, k)
		}
	}
	keep := secrets.ServedKeys[secrets.ServedKind(s)]
	for k := range s.Data {
		if !slices.Contains(keep, k) {
			delete(s.Data, k)
		}
	}
	s.StringData = nil
	return s, nil
}
