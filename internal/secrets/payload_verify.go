package secrets

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
)

// RefusedTooLarge: its Ignition config or fragments inflate past the size
// limit (inflation stops at the limit).
const RefusedTooLarge = "too_large"

// VerifyReasons lists every reason VerifyPayload gives.
var VerifyReasons = []string{
	RefusedInvalid, RefusedTooLarge, RefusedNotOwned, RefusedHashMismatch,
	RefusedContentMismatch, RefusedNameMismatch,
}

// ErrTooLarge is returned (wrapped) by Inflate past its limit.
var ErrTooLarge = errors.New("too large")

// Inflate decompresses one gzip member, reading at most limit+1 bytes of
// output: a decompression bomb costs limit bytes, never its inflated size.
//
// It also refuses anything after the member: the gzip bytes are served as
// stored, and a client inflating a second member would get bytes nobody
// checked.
func Inflate(b []byte, limit int) ([]byte, error) {
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
		return nil, fmt.Errorf("inflates to more than %d bytes: %w", limit, ErrTooLarge)
	}
	if err := zr.Close(); err != nil {
		return nil, fmt.Errorf("corrupt gzip: %w", err)
	}
	// A bytes.Reader is an io.ByteReader, so the gzip reader reads no
	// further than its member's trailer.
	if br.Len() != 0 {
		return nil, fmt.Errorf("%d bytes follow the gzip member", br.Len())
	}
	// ReadAll's buffer grows past what it holds: the caller keeps exactly
	// the inflated bytes.
	return bytes.Clone(out), nil
}

// PoolController returns the UID of the NodePool named pool that controls
// obj (its owner reference with controller: true), "" when obj has no
// controller, and an error when its controller is something else.
func PoolController(obj metav1.Object, pool string) (types.UID, error) {
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

// Verified is a payload Secret VerifyPayload accepts: the Ignition config
// to serve and the NodePool that controls the Secret.
type Verified struct {
	Ignition
	// Owner is the UID of the NodePool of the Secret's pool label that
	// controls it, "" when it has no controller (for a mirror: the UID its
	// annotation names).
	Owner types.UID
	// Origin is the pool the Secret belongs to (OriginOf): its namespace,
	// and whether the Secret is the controller's mirror of the pool's own.
	Origin Origin
}

// VerifyPayload decodes a payload Secret and checks that it is what the
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
// finding a sha256 collision. Its controller is returned for the payload
// server to match against the token Secret's; a controller other than the
// NodePool of its pool label is refused here. Last, its name must be the
// one the controller gives that payload (PayloadSecretName): a Secret of
// another name, even an exact copy, is never used (checked after the
// content, so a forgery is reported for what is forged in it).
//
// Its errors are RefusedErrors, with a reason of VerifyReasons. The
// inflated Ignition config is a copy; Gzip shares memory with s.
func VerifyPayload(s *corev1.Secret, maxBytes int) (Verified, error) {
	v, err := VerifyPayloadHeader(s, maxBytes)
	if err != nil {
		return Verified{}, err
	}
	if err := verifyContent(s, v, maxBytes); err != nil {
		return Verified{}, err
	}
	if want := PayloadSecretName(v.Pool, v.Hash); v.Origin.Name != want {
		if v.Origin.Mirror {
			want = MirrorName(v.Origin.Namespace, want)
		}
		return Verified{}, refused(s, RefusedNameMismatch, fmt.Errorf(
			"it holds payload %s of pool %s, which only the Secret %s holds", payload.Short(v.Hash), v.Pool, want))
	}
	return v, nil
}

// VerifyPayloadHeader checks what VerifyPayload checks but the fragments,
// the manifest and the name (type, labels, annotation, controller, Ignition
// config within maxBytes): for a Secret VerifyPayload accepted whole, read
// again without its fragments.
func VerifyPayloadHeader(s *corev1.Secret, maxBytes int) (Verified, error) {
	fail := func(reason string, err error) (Verified, error) {
		return Verified{}, refused(s, reason, err)
	}
	if s.Type != TypePayload {
		return fail(RefusedInvalid, fmt.Errorf("type %q, want %q", s.Type, TypePayload))
	}
	if ServedKind(s) != KindPayload {
		return fail(RefusedInvalid, fmt.Errorf("label %s is %q, want %q or %q", LabelKind, KindOf(s), KindPayload, KindPayloadMirror))
	}
	hash := s.Annotations[AnnotationPayloadHash]
	if !IsMirror(s) {
		if pool := s.Labels[LabelPool]; pool == "" {
			return fail(RefusedInvalid, fmt.Errorf("label %s is not set", LabelPool))
		} else if errs := validation.IsValidLabelValue(pool); len(errs) > 0 {
			return fail(RefusedInvalid, fmt.Errorf("label %s is not a pool name: %s", LabelPool, errs[0]))
		}
	}
	if err := ValidateHash(hash); err != nil {
		return fail(RefusedInvalid, fmt.Errorf("annotation %s: %w", AnnotationPayloadHash, err))
	}
	if got, want := s.Labels[LabelPayload], hash[:PayloadLabelLength]; !IsMirror(s) && got != want {
		return fail(RefusedInvalid, fmt.Errorf("label %s is %q, want %q (the start of annotation %s)", LabelPayload, got, want, AnnotationPayloadHash))
	}
	origin, err := OriginOf(s)
	if err != nil {
		return Verified{}, err
	}
	pool, owner := origin.Pool, origin.Owner
	gz, ok := s.Data[KeyIgnition]
	if !ok {
		return fail(RefusedInvalid, fmt.Errorf("key %s is missing", KeyIgnition))
	}
	ign, err := Inflate(gz, maxBytes)
	if errors.Is(err, ErrTooLarge) {
		return fail(RefusedTooLarge, fmt.Errorf("%s %w", KeyIgnition, err))
	}
	if err != nil {
		return fail(RefusedInvalid, fmt.Errorf("%s: %w", KeyIgnition, err))
	}
	return Verified{Ignition: Ignition{Pool: pool, Hash: hash, JSON: ign, Gzip: gz}, Owner: owner, Origin: origin}, nil
}

// verifyContent checks that the fragments of s match its manifest and
// compose into v's Ignition config under v's hash.
func verifyContent(s *corev1.Secret, v Verified, maxBytes int) error {
	fail := func(reason string, err error) error { return refused(s, reason, err) }
	pool, hash, ign := v.Pool, v.Hash, v.JSON
	var manifest map[string]string
	if err := json.Unmarshal(s.Data[KeyManifest], &manifest); err != nil || manifest == nil {
		return fail(RefusedInvalid, fmt.Errorf("%s is not a JSON object of component digests", KeyManifest))
	}
	rawFrags, err := Inflate(s.Data[KeyFragments], maxBytes)
	if errors.Is(err, ErrTooLarge) {
		return fail(RefusedTooLarge, fmt.Errorf("%s %w", KeyFragments, err))
	}
	if err != nil {
		return fail(RefusedInvalid, fmt.Errorf("%s: %w", KeyFragments, err))
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(rawFrags, &frags); err != nil || frags == nil {
		return fail(RefusedInvalid, fmt.Errorf("%s is not a JSON object of component fragments", KeyFragments))
	}
	byComponent := make(map[inputs.Component][]byte, len(frags))
	for _, c := range slices.Sorted(maps.Keys(frags)) {
		comp, err := inputs.ParseComponent(c)
		if err != nil {
			return fail(RefusedContentMismatch, fmt.Errorf("%s: %w", KeyFragments, err))
		}
		if got := payload.Digest(frags[c]); manifest[c] != got {
			return fail(RefusedContentMismatch, fmt.Errorf("the fragment of component %s has digest %s, %s says %q", c, got, KeyManifest, manifest[c]))
		}
		byComponent[comp] = frags[c]
	}
	if len(manifest) != len(frags) {
		return fail(RefusedContentMismatch, fmt.Errorf("%s names %d components, %s has %d fragments", KeyManifest, len(manifest), KeyFragments, len(frags)))
	}
	composed, err := payload.Compose(pool, byComponent)
	if err != nil {
		return fail(RefusedContentMismatch, fmt.Errorf("the fragments do not compose: %w", err))
	}
	if composed.Hash != hash {
		return fail(RefusedHashMismatch, fmt.Errorf("the pool and manifest hash to %s, annotation %s says %s", composed.Hash, AnnotationPayloadHash, hash))
	}
	if !bytes.Equal(composed.Ignition, ign) {
		return fail(RefusedContentMismatch, fmt.Errorf("%s is not the composition of its fragments", KeyIgnition))
	}
	return nil
}

// ServedKeys lists, by kind, the data keys the payload server reads of a
// nodepool Secret; a cache of them keeps no other key.
var ServedKeys = map[string][]string{
	KindToken:   {KeyToken, KeyPreviousToken, KeyRotatedAt, KeyPayloadHash},
	KindPayload: {KeyIgnition, KeyManifest, KeyFragments},
}
