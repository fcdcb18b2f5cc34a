package payloadserver

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// FuzzVerifyPayload feeds payload Secrets with arbitrary keys, pool and
// hash to the index's content check and checks that it never panics, never
// inflates past its limit, and accepts only a Secret whose Ignition config
// is, byte for byte, what composing its fragments again gives, under the
// hash it claims (checked here through secrets.DecodePayload, the
// controller's reader).
func FuzzVerifyPayload(f *testing.F) {
	const limit = 64 << 10
	valid := testPayload("n1", "a", "v1", 0)
	vs := payloadSecretUnchecked(f, valid)
	f.Add(vs.Data[secrets.KeyIgnition], vs.Data[secrets.KeyManifest], vs.Data[secrets.KeyFragments], valid.Pool, valid.Hash)
	f.Add(secrets.Gzip([]byte(`{}`)), []byte(`{}`), secrets.Gzip([]byte(`{}`)), "a", valid.Hash)
	f.Add(vs.Data[secrets.KeyIgnition], vs.Data[secrets.KeyManifest], vs.Data[secrets.KeyFragments], "b", valid.Hash)

	f.Fuzz(func(t *testing.T, ign, manifest, frags []byte, pool, hash string) {
		s := payloadSecretUnchecked(t, valid)
		s.Labels[secrets.LabelPool] = pool
		s.Annotations[secrets.AnnotationPayloadHash] = hash
		if len(hash) >= secrets.PayloadLabelLength {
			s.Labels[secrets.LabelPayload] = hash[:secrets.PayloadLabelLength]
		}
		s.Data = map[string][]byte{secrets.KeyIgnition: ign, secrets.KeyManifest: manifest, secrets.KeyFragments: frags}
		pe, err := verifyPayload(s, limit)
		if err != nil {
			if _, ok := err.(*IgnoredError); !ok {
				t.Fatalf("an error that is not an IgnoredError: %v", err)
			}
			return
		}
		if len(pe.payload.JSON) > limit {
			t.Fatalf("accepted %d bytes with a limit of %d", len(pe.payload.JSON), limit)
		}
		p, err := secrets.DecodePayload(s)
		if err != nil {
			t.Fatalf("accepted a Secret the controller's reader refuses: %v", err)
		}
		byComponent := map[inputs.Component][]byte{}
		for c, frag := range p.Fragments {
			comp, err := inputs.ParseComponent(c)
			if err != nil {
				t.Fatal(err)
			}
			byComponent[comp] = frag
		}
		composed, err := payload.Compose(pool, byComponent)
		if err != nil {
			t.Fatalf("accepted fragments that do not compose: %v", err)
		}
		if composed.Hash != hash || !bytes.Equal(composed.Ignition, pe.payload.JSON) || !bytes.Equal(p.Ignition, pe.payload.JSON) {
			t.Fatal("accepted content other than the composition of its fragments under its hash")
		}
	})
}

// payloadSecretUnchecked is the payload Secret of p.
func payloadSecretUnchecked(t testing.TB, p secrets.Payload) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewPayloadSecret("n1", payloadName(p), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
