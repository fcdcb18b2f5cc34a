package payload

import (
	"strings"

	"k8s.io/utils/lru"

	"nodepool.dev/nodepool/internal/inputs"
)

// pinnedCompositions remembers the payloads ComposePinned composed. The
// engine decides a pool's token on every decision, and while management
// drift is pending (OnNextRollout, or a rollout in progress with fresh
// components changed) that means composing the same Ignition again each
// time: a merge and validation of every fragment. Compose is a function of
// the pool and the fragments, and a fragment is named by its digest, so
// the key is the pool and the composed fragments' digests. Payloads are
// read, never changed, so one value is shared by every caller.
var pinnedCompositions = newCompositionMemo(1024)

type compositionMemo struct {
	cache *lru.Cache // safe for concurrent use
}

func newCompositionMemo(size int) *compositionMemo {
	return &compositionMemo{cache: lru.New(size)}
}

func (m *compositionMemo) compose(pool string, frags map[inputs.Component][]byte) (*Payload, error) {
	var key strings.Builder
	key.WriteString(pool)
	for _, c := range inputs.Components() {
		key.WriteByte('/')
		if f, ok := frags[c]; ok {
			key.WriteString(Digest(f))
		}
	}
	k := key.String()
	if v, ok := m.cache.Get(k); ok {
		return v.(*Payload), nil
	}
	p, err := Compose(pool, frags)
	if err != nil {
		// Errors are not remembered: they are rare and name their cause.
		return nil, err
	}
	m.cache.Add(k, p)
	return p, nil
}
