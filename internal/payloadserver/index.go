package payloadserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

// Index answers "which payload does this token get" from memory. It is fed
// token and payload Secrets (Upsert, Delete) by the informer and read by
// every request. Safe for concurrent use.
//
// A token resolves to the payload Secret in the token Secret's namespace,
// of the token Secret's pool, with the token Secret's payload hash; no other
// path leads from a token to a payload, so a token of pool A never reaches
// pool B's payload. A token value claimed by two Secrets resolves to nothing.
type Index struct {
	mu sync.RWMutex
	// tokens is keyed by sha256(token): the map lookup reveals nothing about
	// how much of a presented token matches a real one; the entry's token is
	// then compared in constant time.
	tokens         map[[sha256.Size]byte][]tokenEntry
	tokenSecrets   map[types.NamespacedName]*tokenSecret
	payloads       map[payloadKey][]*payloadEntry
	payloadSecrets map[types.NamespacedName]*payloadEntry
	// invalid holds the Secrets that carry the kind label but do not decode,
	// with their resource version.
	invalid map[types.NamespacedName]string
}

// TokenSecretRef identifies a token Secret, incarnation included (a Secret
// deleted and created again under its name is another one).
type TokenSecretRef struct {
	types.NamespacedName
	UID types.UID
}

type tokenSecret struct {
	ref             TokenSecretRef
	resourceVersion string
	pool            string
	payloadHash     string
	tokens          []string
	// firstFetchRecorded: the Secret carries secrets.AnnotationFirstFetch.
	firstFetchRecorded bool
}

type tokenEntry struct {
	token  []byte
	secret *tokenSecret
}

type payloadKey struct{ namespace, pool, hash string }

type payloadEntry struct {
	key             payloadKey
	secret          types.NamespacedName
	resourceVersion string
	payload         *Payload
}

// Payload is an Ignition config as served: JSON, and the same gzip-compressed
// as stored in its Secret.
type Payload struct {
	JSON, Gzip []byte
}

// Match is what a valid token resolves to.
type Match struct {
	// Secret is the token Secret holding the token.
	Secret TokenSecretRef
	// Pool and PayloadHash say which payload of Secret's namespace the token
	// serves.
	Pool, PayloadHash string
	// FirstFetchRecorded says the token Secret already records a first fetch.
	FirstFetchRecorded bool
	// Payload is nil while the payload Secret is not indexed (not created
	// yet, invalid, or deleted).
	Payload *Payload
}

// IndexStats counts what an Index holds.
type IndexStats struct {
	// Tokens is the number of distinct token values indexed.
	Tokens int
	// TokenSecrets and PayloadSecrets count the valid Secrets indexed.
	TokenSecrets, PayloadSecrets int
	// Invalid counts the Secrets with the kind label that do not decode.
	Invalid int
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		tokens:         map[[sha256.Size]byte][]tokenEntry{},
		tokenSecrets:   map[types.NamespacedName]*tokenSecret{},
		payloads:       map[payloadKey][]*payloadEntry{},
		payloadSecrets: map[types.NamespacedName]*payloadEntry{},
		invalid:        map[types.NamespacedName]string{},
	}
}

// Lookup returns what token resolves to, and false for a token that is not
// the current or previous token of exactly one indexed token Secret.
func (ix *Index) Lookup(token string) (Match, bool) {
	key := sha256.Sum256([]byte(token))
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	entries := ix.tokens[key]
	if len(entries) != 1 {
		return Match{}, false
	}
	e := entries[0]
	if subtle.ConstantTimeCompare(e.token, []byte(token)) != 1 {
		return Match{}, false
	}
	s := e.secret
	m := Match{Secret: s.ref, Pool: s.pool, PayloadHash: s.payloadHash, FirstFetchRecorded: s.firstFetchRecorded}
	if ps := ix.payloads[payloadKey{s.ref.Namespace, s.pool, s.payloadHash}]; len(ps) > 0 {
		m.Payload = ps[0].payload
	}
	return m, true
}

// Upsert indexes a token or payload Secret, replacing what the same Secret
// contributed before. A Secret that does not decode contributes nothing
// (so a token Secret edited into an invalid state stops serving at once)
// and the error says why; it never contains a token or payload content.
func (ix *Index) Upsert(s *corev1.Secret) error {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if ix.unchanged(name, s.ResourceVersion) {
		return nil
	}
	var (
		ts  *tokenSecret
		pe  *payloadEntry
		err error
	)
	switch secrets.KindOf(s) {
	case secrets.KindToken:
		ts, err = newTokenSecret(s)
	case secrets.KindPayload:
		pe, err = newPayloadEntry(s)
	default:
		err = fmt.Errorf("Secret %s has label %s=%q, neither %q nor %q", name, secrets.LabelKind, secrets.KindOf(s), secrets.KindToken, secrets.KindPayload)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.deleteLocked(name)
	switch {
	case err != nil:
		ix.invalid[name] = s.ResourceVersion
	case ts != nil:
		ix.tokenSecrets[name] = ts
		for _, tok := range ts.tokens {
			k := sha256.Sum256([]byte(tok))
			ix.tokens[k] = append(ix.tokens[k], tokenEntry{token: []byte(tok), secret: ts})
		}
	case pe != nil:
		ix.payloadSecrets[name] = pe
		ix.payloads[pe.key] = append(ix.payloads[pe.key], pe)
	}
	return err
}

// unchanged says whether the Secret was indexed at this resource version
// already (an informer resync), so a resync does not inflate every payload
// again.
func (ix *Index) unchanged(name types.NamespacedName, rv string) bool {
	if rv == "" {
		return false
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ts, ok := ix.tokenSecrets[name]; ok {
		return ts.resourceVersion == rv
	}
	if pe, ok := ix.payloadSecrets[name]; ok {
		return pe.resourceVersion == rv
	}
	if got, ok := ix.invalid[name]; ok {
		return got == rv
	}
	return false
}

// Delete forgets a Secret, whatever its kind.
func (ix *Index) Delete(name types.NamespacedName) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.deleteLocked(name)
}

func (ix *Index) deleteLocked(name types.NamespacedName) {
	delete(ix.invalid, name)
	if ts, ok := ix.tokenSecrets[name]; ok {
		delete(ix.tokenSecrets, name)
		for _, tok := range ts.tokens {
			k := sha256.Sum256([]byte(tok))
			if rest := removeFunc(ix.tokens[k], func(e tokenEntry) bool { return e.secret == ts }); len(rest) > 0 {
				ix.tokens[k] = rest
			} else {
				delete(ix.tokens, k)
			}
		}
	}
	if pe, ok := ix.payloadSecrets[name]; ok {
		delete(ix.payloadSecrets, name)
		if rest := removeFunc(ix.payloads[pe.key], func(e *payloadEntry) bool { return e == pe }); len(rest) > 0 {
			ix.payloads[pe.key] = rest
		} else {
			delete(ix.payloads, pe.key)
		}
	}
}

// Stats counts what the index holds.
func (ix *Index) Stats() IndexStats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return IndexStats{
		Tokens:         len(ix.tokens),
		TokenSecrets:   len(ix.tokenSecrets),
		PayloadSecrets: len(ix.payloadSecrets),
		Invalid:        len(ix.invalid),
	}
}

func newTokenSecret(s *corev1.Secret) (*tokenSecret, error) {
	t, err := secrets.DecodeToken(s)
	if err != nil {
		return nil, err
	}
	ts := &tokenSecret{
		ref:             TokenSecretRef{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, UID: s.UID},
		resourceVersion: s.ResourceVersion,
		pool:            t.Pool,
		payloadHash:     t.PayloadHash,
		tokens:          []string{t.Current},
	}
	if t.Previous != "" && t.Previous != t.Current {
		ts.tokens = append(ts.tokens, t.Previous)
	}
	_, ts.firstFetchRecorded = s.Annotations[secrets.AnnotationFirstFetch]
	return ts, nil
}

func newPayloadEntry(s *corev1.Secret) (*payloadEntry, error) {
	ign, err := secrets.DecodeIgnition(s)
	if err != nil {
		return nil, err
	}
	return &payloadEntry{
		key:             payloadKey{namespace: s.Namespace, pool: ign.Pool, hash: ign.Hash},
		secret:          types.NamespacedName{Namespace: s.Namespace, Name: s.Name},
		resourceVersion: s.ResourceVersion,
		payload:         &Payload{JSON: ign.JSON, Gzip: ign.Gzip},
	}, nil
}

// removeFunc returns a new slice without the elements del selects, so
// readers holding the old slice are not disturbed.
func removeFunc[T any](s []T, del func(T) bool) []T {
	var out []T
	for _, e := range s {
		if !del(e) {
			out = append(out, e)
		}
	}
	return out
}
