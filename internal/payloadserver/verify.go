package payloadserver

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// Reasons a payload Secret is not served, the values of the "reason" label
// of nodepool_payload_server_ignored_payloads_total.
const (
	// ReasonInvalid: a label, annotation or key is missing or malformed.
	ReasonInvalid = "invalid"
	// ReasonTooLarge: the Ignition config or the fragments inflate past the
	// size limit (inflation stops at the limit).
	ReasonTooLarge = "too_large"
	// ReasonNotOwned: the Secret's controller is not the NodePool its pool
	// label names.
	ReasonNotOwned = "not_owned"
	// ReasonHashMismatch: the payload hash recomputed from the pool and the
	// manifest is not the one the Secret claims.
	ReasonHashMismatch = "hash_mismatch"
	// ReasonContentMismatch: the fragments do not match the manifest, or do
	// not compose into the Ignition config the Secret holds.
	ReasonContentMismatch = "content_mismatch"
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
	// ReasonNameMismatch: the Secret's content is a payload of its pool,
	// but its name is not the one the controller gives that payload
	// (secrets.PayloadSecretName): only the Secret of that name, unique in
	// its namespace, is served.
	ReasonNameMismatch = "name_mismatch"
)

// IgnoredReasons lists every reason, so the metric starts at 0 for each.
var IgnoredReasons = []string{
	ReasonInvalid, ReasonTooLarge, ReasonNotOwned, ReasonHashMismatch,
	ReasonContentMismatch, ReasonOwnerMismatch, ReasonPoolLimit, ReasonIndexFull,
	ReasonNameMismatch, ReasonNamespaceFull,
}

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

// errTooLarge is returned by inflate past its limit.
var errTooLarge = errors.New("too large")

// inflate decompresses one gzip member, reading at most limit+1 bytes of
// output: a decompression bomb costs limit bytes, never its inflated size.
//
// It also refuses anything after the member: the gzip bytes are served as
// stored, and a client inflating a second member would get bytes nobody
// checked.
func inflate(b []byte, limit int) ([]byte, error) {
	br := bytes.NewReader(b)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("corrupt gzip: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("inflates to more than %d bytes: %w", limit, errTooLarge)
	}
	if err := zr.Close(); err != nil {
		return nil, fmt.Errorf("corrupt gzip: %w", err)
	}
	// A bytes.Reader is an io.ByteReader, so the gzip reader reads no
	// further than its member's trailer.
	if br.Len() != 0 {
		return nil, fmt.Errorf("%d bytes follow the gzip member", br.Len())
	}
	// ReadAll's buffer grows past what it holds: the index keeps exactly
	// the inflated bytes (what IndexStats.Bytes accounts).
	return bytes.Clone(out), nil
}

// poolController returns the UID of the NodePool named pool that controls
// obj (its owner reference with controller: true), "" when obj has no
// controller, and an error when its controller is something else.
func poolController(obj metav1.Object, pool string) (types.UID, error) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return "", nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != nodepoolv1.GroupVersion.Group || ref.Kind != "NodePool" || ref.Name != pool {
		return "", fmt.Errorf("its controller is %s %s (%s), not NodePool %s", ref.Kind, ref.Name, ref.APIVersion, pool)
	}
	if ref.UID == "" {
		return "", fmt.Errorf("its controller reference to NodePool %s has no UID", pool)
	}
	return ref.UID, nil
}

// verifyPayload decodes a payload Secret and checks that it is what the
// controller writes for its pool and hash:
//
//   - it has the payload type, kind and pool labels, a well-formed
//     payload-hash annotation and the matching payload label;
//   - its Ignition config and fragments each inflate within maxBytes;
//   - every fragment has the digest the manifest records, and the payload
//     hash recomputed from the pool name and the manifest (the controller's
//     own function, payload.Compose) is the annotation's;
//   - composing the fragments again gives the stored Ignition config byte
//     for byte (composition is deterministic).
//
// A Secret passing these checks holds exactly the Ignition config that the
// controller renders for that payload hash: forging one for a hash means
// finding a sha256 collision. Its controller owner reference is returned
// for the index to match against the token Secret's; a controller other
// than the NodePool of its pool label is refused here. Last, its name must
// be the one the controller gives that payload (secrets.PayloadSecretName):
// a Secret of another name, even an exact copy, is never served (checked
// after the content, so a forgery is reported for what is forged in it).
func verifyPayload(s *corev1.Secret, maxBytes int) (*payloadEntry, error) {
	pe, err := payloadHeader(s, maxBytes)
	if err != nil {
		return nil, err
	}
	if err := checkContent(s, pe, maxBytes); err != nil {
		return nil, err
	}
	if want := secrets.PayloadSecretName(pe.key.pool, pe.key.hash); s.Name != want {
		return nil, &IgnoredError{Secret: pe.secret, Reason: ReasonNameMismatch, Err: fmt.Errorf(
			"it holds payload %s of pool %s, which only the Secret %s holds", payload.Short(pe.key.hash), pe.key.pool, want)}
	}
	return pe, nil
}

// payloadHeader checks what verifyPayload checks but the fragments and
// manifest (type, labels, annotation, controller, Ignition config within
// maxBytes), and returns the entry to index.
func payloadHeader(s *corev1.Secret, maxBytes int) (*payloadEntry, error) {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	ignored := func(reason string, err error) (*payloadEntry, error) {
		return nil, &IgnoredError{Secret: name, Reason: reason, Err: err}
	}
	if s.Type != secrets.TypePayload {
		return ignored(ReasonInvalid, fmt.Errorf("type %q, want %q", s.Type, secrets.TypePayload))
	}
	pool, hash := s.Labels[secrets.LabelPool], s.Annotations[secrets.AnnotationPayloadHash]
	if pool == "" {
		return ignored(ReasonInvalid, fmt.Errorf("label %s is not set", secrets.LabelPool))
	}
	if errs := validation.IsValidLabelValue(pool); len(errs) > 0 {
		return ignored(ReasonInvalid, fmt.Errorf("label %s is not a pool name: %s", secrets.LabelPool, errs[0]))
	}
	if err := secrets.ValidateHash(hash); err != nil {
		return ignored(ReasonInvalid, fmt.Errorf("annotation %s: %w", secrets.AnnotationPayloadHash, err))
	}
	if got, want := s.Labels[secrets.LabelPayload], hash[:secrets.PayloadLabelLength]; got != want {
		return ignored(ReasonInvalid, fmt.Errorf("label %s is %q, want %q (the start of annotation %s)", secrets.LabelPayload, got, want, secrets.AnnotationPayloadHash))
	}
	owner, err := poolController(s, pool)
	if err != nil {
		return ignored(ReasonNotOwned, err)
	}
	gz, ok := s.Data[secrets.KeyIgnition]
	if !ok {
		return ignored(ReasonInvalid, fmt.Errorf("key %s is missing", secrets.KeyIgnition))
	}
	ign, err := inflate(gz, maxBytes)
	if errors.Is(err, errTooLarge) {
		return ignored(ReasonTooLarge, fmt.Errorf("%s %w", secrets.KeyIgnition, err))
	}
	if err != nil {
		return ignored(ReasonInvalid, fmt.Errorf("%s: %w", secrets.KeyIgnition, err))
	}
	return &payloadEntry{
		key:             payloadKey{namespace: s.Namespace, pool: pool, hash: hash},
		secret:          name,
		resourceVersion: s.ResourceVersion,
		owner:           owner,
		payload:         &Payload{JSON: ign, Gzip: gz},
		bytes:           int64(len(ign) + len(gz)),
	}, nil
}

// checkContent checks that the fragments of s match its manifest and
// compose into pe's Ignition config under pe's hash.
func checkContent(s *corev1.Secret, pe *payloadEntry, maxBytes int) error {
	ignored := func(reason string, err error) error {
		return &IgnoredError{Secret: pe.secret, Reason: reason, Err: err}
	}
	pool, hash, ign := pe.key.pool, pe.key.hash, pe.payload.JSON
	var manifest map[string]string
	if err := json.Unmarshal(s.Data[secrets.KeyManifest], &manifest); err != nil || manifest == nil {
		return ignored(ReasonInvalid, fmt.Errorf("%s is not a JSON object of component digests", secrets.KeyManifest))
	}
	rawFrags, err := inflate(s.Data[secrets.KeyFragments], maxBytes)
	if errors.Is(err, errTooLarge) {
		return ignored(ReasonTooLarge, fmt.Errorf("%s %w", secrets.KeyFragments, err))
	}
	if err != nil {
		return ignored(ReasonInvalid, fmt.Errorf("%s: %w", secrets.KeyFragments, err))
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(rawFrags, &frags); err != nil || frags == nil {
		return ignored(ReasonInvalid, fmt.Errorf("%s is not a JSON object of component fragments", secrets.KeyFragments))
	}
	byComponent := make(map[inputs.Component][]byte, len(frags))
	for _, c := range slices.Sorted(maps.Keys(frags)) {
		comp, err := inputs.ParseComponent(c)
		if err != nil {
			return ignored(ReasonContentMismatch, fmt.Errorf("%s: %w", secrets.KeyFragments, err))
		}
		if got := payload.Digest(frags[c]); manifest[c] != got {
			return ignored(ReasonContentMismatch, fmt.Errorf("the fragment of component %s has digest %s, %s says %q", c, got, secrets.KeyManifest, manifest[c]))
		}
		byComponent[comp] = frags[c]
	}
	if len(manifest) != len(frags) {
		return ignored(ReasonContentMismatch, fmt.Errorf("%s names %d components, %s has %d fragments", secrets.KeyManifest, len(manifest), secrets.KeyFragments, len(frags)))
	}
	composed, err := payload.Compose(pool, byComponent)
	if err != nil {
		return ignored(ReasonContentMismatch, fmt.Errorf("the fragments do not compose: %w", err))
	}
	if composed.Hash != hash {
		return ignored(ReasonHashMismatch, fmt.Errorf("the pool and manifest hash to %s, annotation %s says %s", composed.Hash, secrets.AnnotationPayloadHash, hash))
	}
	if !bytes.Equal(composed.Ignition, ign) {
		return ignored(ReasonContentMismatch, fmt.Errorf("%s is not the composition of its fragments", secrets.KeyIgnition))
	}
	return nil
}

// keptData lists the data keys the server reads, by kind.
var keptData = map[string][]string{
	secrets.KindToken:   {secrets.KeyToken, secrets.KeyPreviousToken, secrets.KeyRotatedAt, secrets.KeyPayloadHash},
	secrets.KindPayload: {secrets.KeyIgnition, secrets.KeyManifest, secrets.KeyFragments},
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
		if k != secrets.AnnotationPayloadHash && k != secrets.AnnotationFirstFetch {
			delete(s.Annotations, k)
		}
	}
	keep := keptData[secrets.KindOf(s)]
	for k := range s.Data {
		if !slices.Contains(keep, k) {
			delete(s.Data, k)
		}
	}
	s.StringData = nil
	return s, nil
}
