package payload

import "nodepool.dev/nodepool/internal/inputs"

// HashOf is the payload hash Compose(pool, fragments) gives, without
// composing: the render cache knows from it whether the pool's payload is
// stored already.
func HashOf(pool string, fragments map[inputs.Component][]byte) string {
	return Uncomposed(pool, fragments).Hash
}
