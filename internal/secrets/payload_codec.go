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
	manifest, err := toManifest(s, sp.Manifest)
	if err != nil {
		return nil, err
	}
	return &payload.Payload{Pool: pool, Ignition: sp.Ignition, Fragments: frags, Manifest: manifest, Hash: sp.Hash}, nil
}

// ToManifest reads what names a payload Secret's payload without inflating
// anything (PayloadIdentity), its manifest by component.
func ToManifest(s *corev1.Secret) (pool, hash string, manifest payload.Manifest, err error) {
	pool, hash, names, err := PayloadIdentity(s)
	if err != nil {
		return "", "", nil, err
	}
	if manifest, err = toManifest(s, names); err != nil {
		return "", "", nil, err
	}
	return pool, hash, manifest, nil
}

func toManifest(s *corev1.Secret, names map[string]string) (payload.Manifest, error) {
	manifest := make(payload.Manifest, len(names))
	for name, d := range names {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return nil, fmt.Errorf("payload Secret %s: %w", s.Name, err)
		}
		manifest[c] = d
	}
	return manifest, nil
}
