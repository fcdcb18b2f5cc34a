package secrets

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Payload is the content of a payload Secret: what a node of the pool
// boots, kept with the fragments it was merged from so a later payload can
// reuse pinned ones.
type Payload struct {
	// Pool is the NodePool's name (label LabelPool).
	Pool string
	// Hash is the payload hash (annotation AnnotationPayloadHash).
	Hash string
	// Ignition is the rendered Ignition config, JSON, uncompressed.
	Ignition []byte
	// Manifest maps each component's name to the digest of its fragment,
	// "sha256:<hex of sha256(fragment)>".
	Manifest map[string]string
	// Fragments maps each component's name to its Ignition fragment (JSON).
	// Its components are exactly the manifest's.
	Fragments map[string][]byte
}

// Validate reports what is wrong with p, if anything.
func (p Payload) Validate() error {
	var errs []error
	if err := validatePool(p.Pool); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateHash(p.Hash); err != nil {
		errs = append(errs, fmt.Errorf("payload hash: %w", err))
	}
	if !json.Valid(p.Ignition) {
		errs = append(errs, fmt.Errorf("%s is not JSON", KeyIgnition))
	}
	if err := validateFragments(p.Manifest, p.Fragments); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validateFragments(manifest map[string]string, fragments map[string][]byte) error {
	var errs []error
	for _, c := range slices.Sorted(maps.Keys(manifest)) {
		if c == "" {
			errs = append(errs, fmt.Errorf("%s has a component without a name", KeyManifest))
			continue
		}
		f, ok := fragments[c]
		if !ok {
			errs = append(errs, fmt.Errorf("component %q is in %s but has no fragment in %s", c, KeyManifest, KeyFragments))
			continue
		}
		if !json.Valid(f) {
			errs = append(errs, fmt.Errorf("the fragment of component %q is not JSON", c))
		}
		if got := digest(f); manifest[c] != got {
			errs = append(errs, fmt.Errorf("the fragment of component %q has digest %s but %s says %q", c, got, KeyManifest, manifest[c]))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(fragments)) {
		if _, ok := manifest[c]; !ok {
			errs = append(errs, fmt.Errorf("component %q has a fragment in %s but is not in %s", c, KeyFragments, KeyManifest))
		}
	}
	return errors.Join(errs...)
}

// digest is how a manifest names a fragment (payload.Digest).
func digest(fragment []byte) string {
	sum := sha256.Sum256(fragment)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewPayloadSecret returns the immutable payload Secret namespace/name
// holding p. The name is the caller's ("<pool>-payload-<payload hash>"). Compression is deterministic: the same
// payload gives the same Secret.
func NewPayloadSecret(namespace, name string, p Payload) (*corev1.Secret, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("payload Secret %s/%s: %w", namespace, name, err)
	}
	manifest, err := json.Marshal(p.Manifest)
	if err != nil {
		return nil, fmt.Errorf("payload Secret %s/%s: encoding %s: %w", namespace, name, KeyManifest, err)
	}
	frags := make(map[string]json.RawMessage, len(p.Fragments))
	for c, f := range p.Fragments {
		frags[c] = f
	}
	fragments, err := json.Marshal(frags)
	if err != nil {
		return nil, fmt.Errorf("payload Secret %s/%s: encoding %s: %w", namespace, name, KeyFragments, err)
	}
	immutable := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels: map[string]string{
				LabelPool:    p.Pool,
				LabelKind:    KindPayload,
				LabelPayload: p.Hash[:PayloadLabelLength],
			},
			Annotations: map[string]string{AnnotationPayloadHash: p.Hash},
		},
		Type:      TypePayload,
		Immutable: &immutable,
		Data: map[string][]byte{
			KeyIgnition:  Gzip(p.Ignition),
			KeyManifest:  manifest,
			KeyFragments: Gzip(fragments),
		},
	}, nil
}

// PayloadDataBound is at least DataBytes of the payload Secret
// NewPayloadSecret makes of p, computed without compressing anything: the
// manifest is encoded as the Secret holds it, and the Ignition config and
// the fragments are counted as gzip makes them at worst (data it cannot
// compress is stored in blocks of 64 KiB, each with a 5-byte header, in a
// member with an 18-byte header and trailer). A payload whose bound fits
// needs no encoding to be known to fit.
func PayloadDataBound(p Payload) int {
	manifest, _ := json.Marshal(p.Manifest) // a map of strings always encodes
	fragments := 2                          // {}
	for c, f := range p.Fragments {
		// "c":f, with every byte of the name escaped at worst; a fragment
		// is compacted, never grown.
		fragments += 6*len(c) + 4 + len(f)
	}
	return len(KeyIgnition) + gzipBound(len(p.Ignition)) + len(KeyManifest) + len(manifest) +
		len(KeyFragments) + gzipBound(fragments)
}

// gzipBound is the most Gzip makes of n bytes.
func gzipBound(n int) int { return n + 5*(n/(64<<10)+2) + 18 + 64 }

// DecodePayload reads a payload Secret whole. It fails, with a
// RefusedError saying which label, annotation or key is wrong, unless s is
// a complete payload Secret named for the payload it claims
// (CheckPayloadName), whose fragments match its manifest and whose pool and
// manifest give its hash (payload_trust.go). Its Ignition config is checked
// to inflate to JSON, not to be the composition of its fragments: the
// controller composes from the fragments, and the payload server checks
// what it serves.
func DecodePayload(s *corev1.Secret) (Payload, error) {
	ign, err := DecodeIgnition(s)
	if err != nil {
		return Payload{}, &RefusedError{Reason: RefusedInvalid, Err: err}
	}
	if err := CheckPayloadName(s); err != nil {
		return Payload{}, err
	}
	p := Payload{Pool: ign.Pool, Hash: ign.Hash, Ignition: ign.JSON}
	fail := func(reason string, err error) (Payload, error) {
		return Payload{}, refused(s, reason, err)
	}
	if err := json.Unmarshal(s.Data[KeyManifest], &p.Manifest); err != nil || p.Manifest == nil {
		return fail(RefusedInvalid, fmt.Errorf("%s is not a JSON object of component digests", KeyManifest))
	}
	raw, err := Gunzip(s.Data[KeyFragments])
	if err != nil {
		return fail(RefusedInvalid, fmt.Errorf("%s: %w", KeyFragments, err))
	}
	var frags map[string]json.RawMessage
	if err := json.Unmarshal(raw, &frags); err != nil || frags == nil {
		return fail(RefusedInvalid, fmt.Errorf("%s is not a JSON object of component fragments", KeyFragments))
	}
	p.Fragments = make(map[string][]byte, len(frags))
	for c, f := range frags {
		p.Fragments[c] = []byte(f)
	}
	if err := validateFragments(p.Manifest, p.Fragments); err != nil {
		return fail(RefusedContentMismatch, err)
	}
	if err := checkPayloadHash(s, p.Pool, p.Hash, p.Manifest); err != nil {
		return Payload{}, err
	}
	return p, nil
}

// PayloadIdentity reads what names a payload Secret's payload without
// inflating anything: its pool, its hash and its manifest. It checks the
// Secret's kind, the pool label, the hash annotation and label, its name
// (CheckPayloadName), that the manifest is a JSON object and that the pool
// and manifest give the hash; not that the fragments and Ignition match
// the manifest (DecodePayload does the fragments; the payload server
// checks both before serving). Its errors are RefusedErrors.
func PayloadIdentity(s *corev1.Secret) (pool, hash string, manifest map[string]string, err error) {
	if err := checkKind(s, KindPayload, TypePayload); err != nil {
		return "", "", nil, &RefusedError{Reason: RefusedInvalid, Err: err}
	}
	pool, hash, errs := identity(s)
	if err := json.Unmarshal(s.Data[KeyManifest], &manifest); err != nil || manifest == nil {
		errs = append(errs, fmt.Errorf("%s is not a JSON object of component digests", KeyManifest))
	}
	if err := errors.Join(errs...); err != nil {
		return "", "", nil, refused(s, RefusedInvalid, err)
	}
	if err := CheckPayloadName(s); err != nil {
		return "", "", nil, err
	}
	if err := checkPayloadHash(s, pool, hash, manifest); err != nil {
		return "", "", nil, err
	}
	return pool, hash, manifest, nil
}

// identity is a payload Secret's pool label and hash annotation, with what
// is wrong with them: a pool name, a hash, and a payload label that is the
// hash's start.
func identity(s *corev1.Secret) (pool, hash string, errs []error) {
	pool, hash = s.Labels[LabelPool], s.Annotations[AnnotationPayloadHash]
	if err := validatePool(pool); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateHash(hash); err != nil {
		errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationPayloadHash, err))
	} else if got, want := s.Labels[LabelPayload], hash[:PayloadLabelLength]; got != want {
		errs = append(errs, fmt.Errorf("label %s is %q, want %q (the start of annotation %s)", LabelPayload, got, want, AnnotationPayloadHash))
	}
	return pool, hash, errs
}

// StripPayload drops what a payload Secret holds besides its manifest
// (its Ignition and fragments, compressed), for a cache of the Secrets'
// identities; other Secrets are left alone. PayloadIdentity reads a
// stripped Secret; DecodePayload needs the Secret whole (Stripped).
func StripPayload(s *corev1.Secret) {
	if s.Labels[LabelKind] != KindPayload || s.Data == nil {
		return
	}
	kept := map[string][]byte{}
	if m, ok := s.Data[KeyManifest]; ok {
		kept[KeyManifest] = m
	}
	s.Data, s.StringData = kept, nil
}

// Stripped reports whether payload Secret s lacks its fragments or its
// Ignition: a copy StripPayload stripped, to be read whole again.
func Stripped(s *corev1.Secret) bool {
	_, fragments := s.Data[KeyFragments]
	_, ignition := s.Data[KeyIgnition]
	return !fragments || !ignition
}

// Ignition is the part of a payload Secret that the payload server serves.
type Ignition struct {
	// Pool and Hash identify the payload, as in Payload.
	Pool, Hash string
	// JSON is the Ignition config; Gzip is the same, compressed, as stored.
	JSON, Gzip []byte
}

// DecodeIgnition reads the identity and Ignition config of a payload Secret
// without its fragments. It checks that the config inflates within
// MaxDecompressedSize to JSON. Gzip shares memory with s.
func DecodeIgnition(s *corev1.Secret) (Ignition, error) {
	if err := checkKind(s, KindPayload, TypePayload); err != nil {
		return Ignition{}, err
	}
	ign := Ignition{Gzip: s.Data[KeyIgnition]}
	var errs []error
	ign.Pool, ign.Hash, errs = identity(s)
	if ign.Gzip == nil {
		errs = append(errs, fmt.Errorf("key %s is missing", KeyIgnition))
	} else if raw, err := Gunzip(ign.Gzip); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", KeyIgnition, err))
	} else if !json.Valid(raw) {
		errs = append(errs, fmt.Errorf("%s does not inflate to JSON", KeyIgnition))
	} else {
		ign.JSON = raw
	}
	if err := errors.Join(errs...); err != nil {
		return Ignition{}, fmt.Errorf("payload Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return ign, nil
}

// PayloadHashOf returns the payload hash a payload Secret claims, or "" when
// it claims none: for cleanup by reference without inflating the payload.
func PayloadHashOf(s *corev1.Secret) string { return s.Annotations[AnnotationPayloadHash] }

// Gzip compresses b deterministically (no name, no modification time, best
// compression).
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the level is valid
	// Writes to a bytes.Buffer do not fail.
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// Gunzip inflates one gzip member of at most MaxDecompressedSize bytes
// (Inflate).
func Gunzip(b []byte) ([]byte, error) { return Inflate(b, MaxDecompressedSize) }

// MaxInflatedBytes is the most the Ignition config (or the fragments) of
// one payload may inflate to: the controller refuses to store a larger
// payload, and the payload server's default refuses to serve one.
const MaxInflatedBytes = 4 << 20

// MaxDataBytes is the most data a Secret may hold: the API server refuses
// a larger one.
const MaxDataBytes = 1 << 20

// DataBytes is the size of a Secret's data as the API server counts it.
func DataBytes(s *corev1.Secret) int {
	n := 0
	for k, v := range s.Data {
		n += len(k) + len(v)
	}
	for k, v := range s.StringData {
		n += len(k) + len(v)
	}
	return n
}
