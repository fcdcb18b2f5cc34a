package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// payloadMemo decodes each payload Secret once (observe.ReadWith): a
// settled pool's reconcile inflates, parses and digests none of its
// payloads. It keeps what the controller reads of a stored payload, its
// manifest and fragments, not its Ignition (the payload server serves
// that from the Secret; the controller composes only payloads not stored
// yet). Pools of the same inputs have payloads of the same fragments (their
// name and hash are not fragments): those payloads share one manifest and
// one map of fragments, and each fragment is kept once.
type payloadMemo struct {
	// api reads a payload Secret whole: the cache holds payload Secrets
	// with their manifest only (CacheOptions).
	api       client.Reader
	decoded   *lru[types.UID, memoized]
	contents  *lru[string, content] // by the manifest's digests
	fragments *lru[string, []byte]  // by digest
}

type memoized struct {
	resourceVersion string
	payload         *payload.Payload
	// refused is why the Secret at this resourceVersion is not used
	// (a secrets.RefusedError): it is not read or inflated again.
	refused error
}

// content is what payloads of the same fragments share.
type content struct {
	manifest  payload.Manifest
	fragments map[inputs.Component][]byte
}

func newPayloadMemo(payloads int, api client.Reader) *payloadMemo {
	return &payloadMemo{api: api, decoded: newLRU[types.UID, memoized](payloads), contents: newLRU[string, content](max(payloads/4, 1024)),
		fragments: newLRU[string, []byte](max(payloads/4, 1024))}
}

// decode is a payload Secret's payload; a Secret seen before at the same
// resourceVersion is not decoded again. The payload is read, never changed.
func (m *payloadMemo) decode(ctx context.Context, pool string, s *corev1.Secret) (*payload.Payload, error) {
	if e, ok := m.decoded.get(s.UID); ok && s.UID != "" && e.resourceVersion == s.ResourceVersion {
		if e.refused != nil {
			return nil, e.refused
		}
		if e.payload.Pool == pool {
			return e.payload, nil
		}
	}
	if p := m.known(pool, s); p != nil {
		m.decoded.put(s.UID, memoized{resourceVersion: s.ResourceVersion, payload: p})
		return p, nil
	}
	whole := s
	if secrets.Stripped(s) {
		whole = &corev1.Secret{}
		if err := m.api.Get(ctx, client.ObjectKeyFromObject(s), whole); err != nil {
			return nil, fmt.Errorf("reading payload Secret %s: %w", s.Name, err)
		}
	}
	p, err := secrets.ToPayload(pool, whole)
	if err != nil {
		var refused *secrets.RefusedError
		if errors.As(err, &refused) && s.UID != "" {
			m.decoded.put(s.UID, memoized{resourceVersion: s.ResourceVersion, refused: err})
		}
		return nil, err
	}
	p.Ignition = nil
	key := contentKey(p.Manifest)
	if c, ok := m.contents.get(key); ok {
		p.Manifest, p.Fragments = c.manifest, c.fragments
	} else {
		for comp, f := range p.Fragments {
			d := p.Manifest[comp]
			if shared, ok := m.fragments.get(d); ok {
				p.Fragments[comp] = shared
			} else {
				m.fragments.put(d, f)
			}
		}
		m.contents.put(key, content{manifest: p.Manifest, fragments: p.Fragments})
	}
	if s.UID != "" {
		m.decoded.put(s.UID, memoized{resourceVersion: s.ResourceVersion, payload: p})
	}
	return p, nil
}

// known is the payload of a Secret whose manifest names fragments the memo
// holds, read without inflating the Secret: after a restart, a fleet of
// pools of the same inputs inflates one payload Secret per distinct
// manifest, not one per pool. The Secret must have its payload's name and
// its manifest must give the Secret's hash for this pool (ToManifest). The fragments come from a Secret decoded and checked whole
// before; this Secret's own fragments and Ignition are not checked (the
// payload server checks what it serves). nil: decode it whole.
func (m *payloadMemo) known(pool string, s *corev1.Secret) *payload.Payload {
	if s.UID == "" {
		return nil
	}
	owner, hash, manifest, err := secrets.ToManifest(s)
	if err != nil || owner != pool {
		return nil
	}
	c, ok := m.contents.get(contentKey(manifest))
	if !ok || payload.HashOf(pool, c.manifest) != hash {
		return nil
	}
	return &payload.Payload{Pool: pool, Hash: hash, Manifest: c.manifest, Fragments: c.fragments}
}

// contentKey names a manifest: its components and their digests, in order.
func contentKey(m payload.Manifest) string {
	var b strings.Builder
	for _, c := range slices.SortedFunc(maps.Keys(m), func(a, b inputs.Component) int { return strings.Compare(a.Name(), b.Name()) }) {
		b.WriteString(c.Name())
		b.WriteByte('=')
		b.WriteString(m[c])
		b.WriteByte('\n')
	}
	return b.String()
}
