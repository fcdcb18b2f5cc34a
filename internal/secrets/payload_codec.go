package secrets

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// FromPayload is what a payload Secret holds of a rendered payload.
func FromPayload(p *payload.Payload) Payload {
	out := Payload{Pool: p.Pool, Hash: p.Hash, Ignition: p.Ignition, Manifest: map[string]string{}, Fragments: map[string][]byte{}}
	for c, d := range p.Manifest {
		out.Manifest[c.Name()] = d
	}
	for c, f := range p.Fragments {
		out.Fragments[c.Name()] = f
	}
	return out
}

// ToPayload reads a payload Secret of pool back into the payload it holds
// (the inverse of FromPayload with NewPayloadSecret).
func ToPayload(pool string, s *corev1.Secret) (*payload.Payload, error) {
	sp, err := DecodePayload(s)
	if err != nil {
		return nil, err
	}
	frags := make(map[inputs.Component][]byte, len(sp.Fragments))
	for name, f := range sp.Fragments {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return nil, fmt.Errorf("payload Secret %s: %w", s.Name, err)
		}
		frags[c] = f
	}
	manifest := make(payload.Manifest, len(sp.Manifest))
	for name, d := range sp.Manifest {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return nil, fmt.Errorf("payload Secret %s: %w", s.Name, err)
		}
		manifest[c] = d
	}
	return &payload.Payload{Pool: pool, Ignition: sp.Ignition, Fragments: frags, Manifest: manifest, Hash: sp.Hash}, nil
}
