package payloadserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
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
// of the token Secret's pool, with the token Secret's payload hash, and
// controlled by the same NodePool (owner UID) as the token Secret (a token
// Secret without a controller, which the controller never writes, gets
// only a payload without one: test fixtures and the simulator); no other
// path leads from a token to a payload, so a token of pool A never reaches
// pool B's payload. A token value claimed by two Secrets resolves to nothing.
//
// A payload Secret is indexed only once its content is verified (see
// verifyPayload): its Ignition config is the composition of its fragments
// and hashes to the payload hash it claims, and its name is the one the
// controller gives that payload. A Secret that fails, or that a
// token Secret of another controller asks for, is never served, whatever
// its name sorts as; each is reported once to IndexLimits.OnIgnored.
//
// Memory is bounded: one payload inflates to at most MaxPayloadBytes (a
// decompression bomb is cut there), a pool has at most MaxPayloadsPerPool
// payloads indexed, a namespace at most MaxNamespaceBytes and all
// payloads together at most MaxBytes (see budget.go). The informer's cache
// keeps the Ignition config of the admitted payload Secrets only.
type Index struct {
	limits    IndexLimits
	onIgnored func(*IgnoredError)

	mu sync.RWMutex
	// tokens is keyed by sha256(token): the map lookup reveals nothing about
	// how much of a presented token matches a real one; the entry's token is
	// then compared in constant time.
	tokens         map[[sha256.Size]byte][]tokenEntry
	tokenSecrets   map[types.NamespacedName]*tokenSecret
	payloads       map[payloadKey][]*payloadEntry
	payloadSecrets map[types.NamespacedName]*payloadEntry
	// invalid holds the Secrets that carry the kind label but do not decode,
	// and the payload Secrets refused, with their resource version.
	invalid map[types.NamespacedName]string
	// perPool counts the payload Secrets held per pool, nsBytes the bytes
	// held per namespace and bytes those of all (inflated JSON and gzip):
	// held are the indexed payloads and the admitted pending ones.
	perPool map[poolKey]int
	nsBytes map[string]int64
	bytes   int64
	// pending holds the transform's decision on the latest version of a
	// payload Secret, until its event is handled (budget.go).
	pending map[types.NamespacedName]*admission
	// deferred holds the payload Secrets refused for a limit (pool_limit,
	// namespace_full, index_full): they are tried again when a payload
	// leaves the index (Deferred, Admissible).
	deferred map[types.NamespacedName]deferral

	// reported holds the payload Secrets reported as ignored at lookup
	// (owner mismatch), by resource version, so each is reported once.
	repMu    sync.Mutex
	reported map[types.NamespacedName]string

	// verdicts are the content checks made by Transform.
	verdicts verdicts
}

// IndexLimits bound what an Index holds. Zero values take the defaults.
type IndexLimits struct {
	// MaxPayloadBytes is the largest Ignition config (and fragments) one
	// payload Secret may inflate to; inflation stops there.
	MaxPayloadBytes int
	// MaxPayloadsPerPool is how many payload Secrets of one pool (namespace,
	// pool name and controller UID) are indexed at most.
	MaxPayloadsPerPool int
	// MaxBytes is the budget of all indexed payloads (IndexStats.Bytes).
	MaxBytes int64
	// MaxNamespaceBytes is the share of MaxBytes the payloads of one
	// namespace may hold, so the Secrets of one namespace cannot fill the
	// index for the others. Default: MaxBytes (no share) for an Index;
	// the Server defaults it to NamespaceShare.
	MaxNamespaceBytes int64
	// OnIgnored is called, once per Secret and resource version, for each
	// payload Secret the index refuses or will not serve, with the reason.
	// It is called with the index locked: it must not call the index.
	OnIgnored func(*IgnoredError)
}

// Defaults of IndexLimits.
const (
	// DefaultMaxPayloadBytes: Ignition configs of workers are tens to
	// hundreds of KiB; 4 MiB leaves room for embedded binaries.
	DefaultMaxPayloadBytes = secrets.MaxInflatedBytes
	// DefaultMaxPayloadsPerPool: a pool holds its running and latest
	// payloads and those of a rollout or two in flight.
	DefaultMaxPayloadsPerPool = 16
	// DefaultMaxIndexBytes: half the Deployment's memory limit.
	DefaultMaxIndexBytes = 512 << 20
)

func (l IndexLimits) withDefaults() IndexLimits {
	if l.MaxPayloadBytes <= 0 {
		l.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if l.MaxPayloadsPerPool <= 0 {
		l.MaxPayloadsPerPool = DefaultMaxPayloadsPerPool
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxIndexBytes
	}
	if l.MaxNamespaceBytes <= 0 {
		l.MaxNamespaceBytes = l.MaxBytes
	}
	return l
}

// poolKey is what MaxPayloadsPerPool counts: the payloads of a pool under
// one controller, so Secrets claiming another owner (forged, or of a former
// incarnation of the pool) do not take the slots of the current one.
type poolKey struct {
	namespace, pool string
	owner           types.UID
}

func poolKeyOf(pe *payloadEntry) poolKey {
	return poolKey{pe.key.namespace, pe.key.pool, pe.owner}
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
	// namespace and pool name the pool: the Secret's namespace, or the
	// one a mirror names (secrets.OriginOf).
	namespace, pool string
	payloadHash     string
	// owner is the UID of the NodePool controlling the Secret, "" when it
	// has no controller.
	owner  types.UID
	tokens []string
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
	uid             types.UID
	resourceVersion string
	// owner is the UID of the NodePool controlling the Secret, "" when it
	// has no controller.
	owner   types.UID
	payload *Payload
	// bytes is what payload holds.
	bytes int64
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
	// Invalid counts the Secrets with the kind label that do not decode,
	// and the payload Secrets refused (see IgnoredError).
	Invalid int
	// Bytes is what the indexed payloads hold: inflated JSON plus gzip
	// (with those admitted by the informer's transform and about to be
	// indexed).
	Bytes int64
}

// NewIndex returns an empty index with the default limits.
func NewIndex() *Index { return NewIndexWithLimits(IndexLimits{}) }

// NewIndexWithLimits returns an empty index bounded by limits.
func NewIndexWithLimits(limits IndexLimits) *Index {
	limits = limits.withDefaults()
	return &Index{
		limits:         limits,
		onIgnored:      limits.OnIgnored,
		tokens:         map[[sha256.Size]byte][]tokenEntry{},
		tokenSecrets:   map[types.NamespacedName]*tokenSecret{},
		payloads:       map[payloadKey][]*payloadEntry{},
		payloadSecrets: map[types.NamespacedName]*payloadEntry{},
		invalid:        map[types.NamespacedName]string{},
		perPool:        map[poolKey]int{},
		nsBytes:        map[string]int64{},
		pending:        map[types.NamespacedName]*admission{},
		reported:       map[types.NamespacedName]string{},
		deferred:       map[types.NamespacedName]deferral{},
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
	// Every candidate has verified content; only one controlled by the
	// token Secret's own NodePool is served. All have the payload's name
	// (verifyPayload): more than one is the same Secret deleted and made
	// again, and they hold the same bytes.
	for _, pe := range ix.payloads[payloadKey{s.namespace, s.pool, s.payloadHash}] {
		if pe.owner == s.owner {
			if m.Payload == nil {
				m.Payload = pe.payload
			}
			continue
		}
		ix.reportOwnerMismatch(pe, s)
	}
	return m, true
}

// reportOwnerMismatch reports, once per resource version, a payload Secret
// that a token Secret of another controller asked for.
func (ix *Index) reportOwnerMismatch(pe *payloadEntry, ts *tokenSecret) {
	if ix.onIgnored == nil {
		return
	}
	ix.repMu.Lock()
	defer ix.repMu.Unlock()
	if ix.reported[pe.secret] == pe.resourceVersion {
		return
	}
	ix.reported[pe.secret] = pe.resourceVersion
	ix.onIgnored(&IgnoredError{Secret: pe.secret, Reason: ReasonOwnerMismatch, Err: fmt.Errorf(
		"its controller NodePool UID is %q, token Secret %s of the same pool has %q", pe.owner, ts.ref.NamespacedName, ts.owner)})
}

// Upsert indexes a token or payload Secret, replacing what the same Secret
// contributed before. A Secret that does not decode contributes nothing
// (so a token Secret edited into an invalid state stops serving at once)
// and the error says why; it never contains a token or payload content.
func (ix *Index) Upsert(s *corev1.Secret) error {
	_, err := ix.upsert(s, false)
	return err
}

// upsert is Upsert, and says whether it made room in the budgets (a
// payload replaced by none, or by a smaller one or of another pool); force
// indexes again a version already seen (Readmit).
func (ix *Index) upsert(s *corev1.Secret, force bool) (freed bool, err error) {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if !force && ix.unchanged(s) {
		return false, nil
	}
	var (
		ts *tokenSecret
		pe *payloadEntry
		a  *admission
	)
	switch secrets.ServedKind(s) {
	case secrets.KindToken:
		ts, err = newTokenSecret(s)
	case secrets.KindPayload:
		// The transform decided on this version: its entry is charged
		// already, or it was refused for a limit.
		ix.mu.Lock()
		a = ix.takePending(s)
		d, deferred := ix.deferred[name]
		ix.mu.Unlock()
		if a == nil && deferred && s.ResourceVersion != "" && d.resourceVersion == s.ResourceVersion && s.Data[secrets.KeyIgnition] == nil {
			// The cached copy of a deferred version (a resync): it stays
			// deferred until there is room (Admissible, Readmit).
			return false, nil
		}
		switch {
		case a == nil:
			if pe, err = ix.decodePayload(s); pe != nil {
				pe.uid = s.UID
			}
		case a.err != nil:
			pe, err = a.pe, a.err
		default:
			pe = a.pe
		}
	default:
		err = fmt.Errorf("Secret %s has label %s=%q, neither %q nor %q", name, secrets.LabelKind, secrets.KindOf(s), secrets.KindToken, secrets.KindPayload)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	// A version refused for a limit already is not reported again.
	d, wasDeferred := ix.deferred[name]
	repeat := wasDeferred && d.resourceVersion == s.ResourceVersion && s.ResourceVersion != ""
	old := ix.payloadSecrets[name]
	ix.deleteLocked(name)
	if pe != nil && err == nil && a == nil {
		if ign := ix.refusal(pe, nil); ign != nil {
			err = ign
		}
	}
	var ign *IgnoredError
	if errors.As(err, &ign) && ix.onIgnored != nil && !(repeat && isLimit(ign.Reason)) {
		ix.onIgnored(ign)
	}
	switch {
	case ign != nil && isLimit(ign.Reason):
		ix.deferred[name] = deferral{resourceVersion: s.ResourceVersion, size: sizeOnly(pe)}
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
		if a == nil {
			ix.charge(pe, 1)
		}
	}
	if old != nil {
		now := ix.payloadSecrets[name]
		freed = now == nil || now.bytes < old.bytes || poolKeyOf(now) != poolKeyOf(old)
	}
	return freed, err
}

// unchanged says whether the Secret was indexed at this resource version
// already (an informer resync), so a resync does not inflate every payload
// again.
func (ix *Index) unchanged(s *corev1.Secret) bool {
	name, rv := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, s.ResourceVersion
	if rv == "" {
		return false
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if a, ok := ix.pending[name]; ok && a.key == (verdictKey{s.UID, rv}) {
		return false // the transform decided on this version: take it
	}
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
func (ix *Index) Delete(name types.NamespacedName) { ix.DeleteIncarnation(name, "") }

// DeleteIncarnation forgets a Secret, and what Transform recorded of its
// incarnation uid only ("": of every incarnation), so a Secret created
// again under the name, and already transformed, keeps its verdict.
func (ix *Index) DeleteIncarnation(name types.NamespacedName, uid types.UID) {
	ix.verdicts.forget(name, uid)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.forgetPending(name, uid)
	ix.deleteLocked(name)
}

// Deferred returns the payload Secrets refused for a limit, to Upsert again
// once a payload has left the index.
func (ix *Index) Deferred() []types.NamespacedName {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]types.NamespacedName, 0, len(ix.deferred))
	for n := range ix.deferred {
		out = append(out, n)
	}
	return out
}

func (ix *Index) deleteLocked(name types.NamespacedName) {
	delete(ix.invalid, name)
	delete(ix.deferred, name)
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
	if _, ok := ix.reported[name]; ok {
		ix.repMu.Lock()
		delete(ix.reported, name)
		ix.repMu.Unlock()
	}
	if pe, ok := ix.payloadSecrets[name]; ok {
		delete(ix.payloadSecrets, name)
		ix.charge(pe, -1)
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
		Bytes:          ix.bytes,
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
	origin, err := secrets.OriginOf(s)
	if err != nil {
		return nil, fmt.Errorf("token Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	ts.namespace, ts.owner = origin.Namespace, origin.Owner
	_, ts.firstFetchRecorded = s.Annotations[secrets.AnnotationFirstFetch]
	return ts, nil
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
