package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// payloadMemo decodes each payload Secret once (observe.ReadWith): a
// settled pool's reconcile inflates, parses and digests none of its
// payloads. It keeps what the controller reads of a stored payload, its
// manifest and fragments, not its Ignition (the payload server serves
// that from the Secret; the controller composes only payloads not stored
// yet). Fragments are kept once however many pools' payloads hold them:
// pools of the same inputs share all but their name and hash, which are
// not fragments.
type payloadMemo struct {
	decoded   *lru[types.UID, memoized]
	fragments *lru[string, []byte] // by digest
}

type memoized struct {
	resourceVersion string
	payload         *payload.Payload
}

func newPayloadMemo(payloads int) *payloadMemo {
	return &payloadMemo{decoded: newLRU[types.UID, memoized](payloads), fragments: newLRU[string, []byte](max(payloads/4, 1024))}
}

// decode is a payload Secret's payload; a Secret seen before at the same
// resourceVersion is not decoded again.
func (m *payloadMemo) decode(pool string, s *corev1.Secret) (*payload.Payload, error) {
	if e, ok := m.decoded.get(s.UID); ok && s.UID != "" && e.resourceVersion == s.ResourceVersion && e.payload.Pool == pool {
		return e.payload, nil
	}
	p, err := secrets.ToPayload(pool, s)
	if err != nil {
		return nil, err
	}
	p.Ignition = nil
	for c, f := range p.Fragments {
		d := p.Manifest[c]
		if shared, ok := m.fragments.get(d); ok {
			p.Fragments[c] = shared
		} else {
			m.fragments.put(d, f)
		}
	}
	if s.UID != "" {
		m.decoded.put(s.UID, memoized{resourceVersion: s.ResourceVersion, payload: p})
	}
	return p, nil
}
