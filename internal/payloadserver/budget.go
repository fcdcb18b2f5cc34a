package payloadserver

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

// The budgets of an Index: which payloads it admits, and so which the
// informer's cache may keep the Ignition config of.
//
// A payload Secret is admitted when its pool (namespace, name, controller
// UID) has fewer than MaxPayloadsPerPool payloads held, its namespace holds
// at most MaxNamespaceBytes with it, and the whole index at most MaxBytes.
// "Held" counts the indexed payloads and those the informer's transform
// admitted and the event handler has not indexed yet: the transform
// decides, so the cache keeps the Ignition config (the very bytes the index
// serves) of admitted payload Secrets only. A payload Secret refused for a
// limit is cached without data and deferred; once room is made it is read
// again from the API server (Admissible, Readmit).

// DefaultNamespaceShares is how many namespaces share the index's budget
// when the server serves every namespace: each may hold at most
// MaxBytes/DefaultNamespaceShares.
const DefaultNamespaceShares = 8

// NamespaceShare is the default MaxNamespaceBytes of an index of maxBytes
// serving namespaces namespaces (0: every namespace): maxBytes divided by
// their number, or by DefaultNamespaceShares. With listed namespaces the
// shares add up to the budget, so no namespace can take another's.
func NamespaceShare(maxBytes int64, namespaces int) int64 {
	if namespaces <= 0 {
		namespaces = DefaultNamespaceShares
	}
	return maxBytes / int64(namespaces)
}

// admission is the transform's decision on one version of a payload
// Secret, until its event is handled.
type admission struct {
	key verdictKey
	// pe is the entry to index, charged to the budgets, when admitted;
	// when refused, it only sizes the Secret (no payload).
	pe  *payloadEntry
	err *IgnoredError
}

// deferral is a payload Secret refused for a limit: its version, and its
// size (an entry without payload) to tell when it fits.
type deferral struct {
	resourceVersion string
	size            *payloadEntry
}

// sizeOnly is pe without its payload: what a deferral keeps.
func sizeOnly(pe *payloadEntry) *payloadEntry {
	if pe == nil {
		return nil
	}
	cp := *pe
	cp.payload = nil
	return &cp
}

// isLimit says whether reason is a refusal for a budget, tried again once
// there is room.
func isLimit(reason string) bool {
	return reason == ReasonPoolLimit || reason == ReasonNamespaceFull || reason == ReasonIndexFull
}

// charge adds (sign 1) or removes (sign -1) pe from the budgets.
func (ix *Index) charge(pe *payloadEntry, sign int) {
	pk := poolKeyOf(pe)
	if ix.perPool[pk] += sign; ix.perPool[pk] <= 0 {
		delete(ix.perPool, pk)
	}
	ns := pe.key.namespace
	if ix.nsBytes[ns] += int64(sign) * pe.bytes; ix.nsBytes[ns] <= 0 {
		delete(ix.nsBytes, ns)
	}
	ix.bytes += int64(sign) * pe.bytes
}

// refusal says which budget holding pe would break, nil if none; except is
// held and would be replaced by pe (nil: none). Called with ix.mu held.
func (ix *Index) refusal(pe, except *payloadEntry) *IgnoredError {
	pk, ns := poolKeyOf(pe), pe.key.namespace
	pool, nsBytes, total := ix.perPool[pk], ix.nsBytes[ns], ix.bytes
	if except != nil {
		if poolKeyOf(except) == pk {
			pool--
		}
		if except.key.namespace == ns {
			nsBytes -= except.bytes
		}
		total -= except.bytes
	}
	switch {
	case pool >= ix.limits.MaxPayloadsPerPool:
		return &IgnoredError{Secret: pe.secret, Reason: ReasonPoolLimit, Err: fmt.Errorf(
			"pool %s/%s has %d payload Secrets of its controller (UID %q) indexed already, the limit", pk.namespace, pk.pool, ix.limits.MaxPayloadsPerPool, pk.owner)}
	case ix.limits.MaxNamespaceBytes < ix.limits.MaxBytes && nsBytes+pe.bytes > ix.limits.MaxNamespaceBytes:
		return &IgnoredError{Secret: pe.secret, Reason: ReasonNamespaceFull, Err: fmt.Errorf(
			"its %d bytes would take namespace %s past its share of %d bytes of the index (%d held)", pe.bytes, ns, ix.limits.MaxNamespaceBytes, nsBytes)}
	case total+pe.bytes > ix.limits.MaxBytes:
		return &IgnoredError{Secret: pe.secret, Reason: ReasonIndexFull, Err: fmt.Errorf(
			"its %d bytes would take the index past its budget of %d bytes (%d held)", pe.bytes, ix.limits.MaxBytes, total)}
	}
	return nil
}

// admit decides, in the informer's transform, whether the index has room
// for the verified payload Secret s (version key; pe its entry if already
// built), and reserves it if so. It returns whether the cache may keep s's
// Ignition config: then the cached bytes are those the index holds.
func (ix *Index) admit(s *corev1.Secret, key verdictKey, pe *payloadEntry) bool {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if kept, decided := ix.admitted(s, name, key); decided {
		return kept
	}
	if pe == nil {
		var err error
		if pe, err = payloadHeader(s, ix.limits.MaxPayloadBytes); err != nil {
			return false
		}
	}
	pe.uid = key.uid
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old := ix.pending[name]; old != nil {
		if old.err == nil {
			ix.charge(old.pe, -1)
		}
		delete(ix.pending, name)
	}
	if ign := ix.refusal(pe, ix.payloadSecrets[name]); ign != nil {
		ix.pending[name] = &admission{key: key, pe: sizeOnly(pe), err: ign}
		return false
	}
	ix.charge(pe, 1)
	ix.pending[name] = &admission{key: key, pe: pe}
	return true
}

// admitted answers admit for a version already decided (the cache may
// transform an object more than once): the cached object then shares the
// Ignition config the index holds.
func (ix *Index) admitted(s *corev1.Secret, name types.NamespacedName, key verdictKey) (kept, decided bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var held *payloadEntry
	if a := ix.pending[name]; a != nil && a.key == key {
		if a.err != nil {
			return false, true
		}
		held = a.pe
	} else if pe := ix.payloadSecrets[name]; pe != nil && pe.uid == key.uid && pe.resourceVersion == key.rv {
		held = pe
	}
	if held == nil {
		return false, false
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[secrets.KeyIgnition] = held.payload.Gzip
	return true, true
}

// takePending removes and returns the transform's decision on this version
// of s, nil if there is none. An admitted entry stays charged: the caller
// indexes it. Called with ix.mu held.
func (ix *Index) takePending(s *corev1.Secret) *admission {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	a := ix.pending[name]
	if a == nil || s.UID == "" || a.key != (verdictKey{s.UID, s.ResourceVersion}) {
		return nil
	}
	delete(ix.pending, name)
	return a
}

// forgetPending drops the transform's decision on name's incarnation uid
// ("": any). Called with ix.mu held.
func (ix *Index) forgetPending(name types.NamespacedName, uid types.UID) {
	a := ix.pending[name]
	if a == nil || (uid != "" && a.key.uid != uid) {
		return
	}
	if a.err == nil {
		ix.charge(a.pe, -1)
	}
	delete(ix.pending, name)
}

// Admissible returns the deferred payload Secrets that fit the budgets now,
// together: the ones to read again and Readmit. Secrets of a namespace past
// its share are not among them, however many.
func (ix *Index) Admissible() []types.NamespacedName {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	names := make([]types.NamespacedName, 0, len(ix.deferred))
	for n, d := range ix.deferred {
		if d.size != nil {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b types.NamespacedName) int {
		return strings.Compare(a.String(), b.String())
	})
	var fit []types.NamespacedName
	for _, n := range names {
		if size := ix.deferred[n].size; ix.refusal(size, nil) == nil {
			ix.charge(size, 1)
			fit = append(fit, n)
		}
	}
	for _, n := range fit {
		ix.charge(ix.deferred[n].size, -1)
	}
	return fit
}

// UpsertFreeing is Upsert, and says whether the Secret's new version made
// room in the budgets, so that deferred payloads may fit.
func (ix *Index) UpsertFreeing(s *corev1.Secret) (freed bool, err error) {
	return ix.upsert(s, false)
}

// deferredFits says whether the deferred payload Secret name fits the
// budgets now (room was made between the transform's refusal and its
// event).
func (ix *Index) deferredFits(name types.NamespacedName) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	d, ok := ix.deferred[name]
	return ok && d.size != nil && ix.refusal(d.size, nil) == nil
}

// Readmit indexes a deferred payload Secret read again from the API server
// (whole, as the informer receives it): it is transformed, admitted if
// there is room, and indexed. The informer's cache keeps its copy without
// data; the index holds the one read.
func (ix *Index) Readmit(s *corev1.Secret) error {
	if _, err := ix.Transform(s); err != nil {
		return err
	}
	_, err := ix.upsert(s, true)
	return err
}
