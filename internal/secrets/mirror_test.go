package secrets_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

const poolUID = types.UID("6a1f0b1e-0000-4000-8000-000000000001")

// composedPayloadSecret is a payload Secret VerifyPayload accepts whole: a
// composition of one fragment per component, as the controller renders.
func composedPayloadSecret(t *testing.T) (*corev1.Secret, secrets.Payload) {
	t.Helper()
	frags := map[inputs.Component][]byte{}
	for _, c := range inputs.Components() {
		frags[c] = []byte(`{"ignition":{"version":"3.5.0"}}`)
	}
	pl, err := payload.Compose("workers", frags)
	if err != nil {
		t.Fatal(err)
	}
	p := secrets.FromPayload(pl)
	s, err := secrets.NewPayloadSecret("team-a", secrets.PayloadSecretName(p.Pool, p.Hash), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.VerifyPayload(s, 1<<20); err != nil {
		t.Fatalf("the source is refused: %v", err)
	}
	return s, p
}

func mirrorOf(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	m, err := secrets.NewMirror("nodepool-system", s, poolUID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAMirrorVerifiesAsItsSourceAndNamesItsPool(t *testing.T) {
	s, p := composedPayloadSecret(t)
	m := mirrorOf(t, s)
	if m.Name != "team-a."+s.Name || secrets.KindOf(m) != secrets.KindPayloadMirror || m.Labels[secrets.LabelPool] != "" {
		t.Fatalf("mirror %s, kind %q, pool label %q: want team-a.<name>, %s and no %s (earlier versions select by it)",
			m.Name, secrets.KindOf(m), m.Labels[secrets.LabelPool], secrets.KindPayloadMirror, secrets.LabelPool)
	}
	if secrets.Selector().Matches(labels.Set(m.Labels)) {
		t.Error("the selector of the pools' own Secrets matches a mirror: an earlier payload server would index it")
	}
	v, err := secrets.VerifyPayload(m, 1<<20)
	if err != nil {
		t.Fatalf("a genuine mirror is refused: %v", err)
	}
	if v.Origin.Namespace != "team-a" || v.Pool != p.Pool || v.Owner != poolUID || !v.Origin.Mirror || v.Hash != p.Hash {
		t.Errorf("verified %+v, want pool team-a/%s of UID %s", v.Origin, p.Pool, poolUID)
	}
}

func TestAForgedMirrorIsRefusedForWhatIsForged(t *testing.T) {
	for name, tc := range map[string]struct {
		forge  func(t *testing.T, m *corev1.Secret, p secrets.Payload)
		reason string
	}{
		"another name": {func(_ *testing.T, m *corev1.Secret, _ secrets.Payload) {
			m.Name = "team-a.workers-payload-0000000000000000"
		}, secrets.RefusedNameMismatch},
		"another namespace's prefix": {func(_ *testing.T, m *corev1.Secret, _ secrets.Payload) { m.Name = "team-b." + m.Name[len("team-a."):] }, secrets.RefusedNameMismatch},
		"no pool UID": {func(_ *testing.T, m *corev1.Secret, _ secrets.Payload) {
			delete(m.Annotations, secrets.AnnotationMirrorPoolUID)
		}, secrets.RefusedInvalid},
		"fragments of another config": {func(t *testing.T, m *corev1.Secret, p secrets.Payload) { withEvilFragment(t, m, p) }, secrets.RefusedHashMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			s, p := composedPayloadSecret(t)
			m := mirrorOf(t, s)
			tc.forge(t, m, p)
			if _, err := secrets.VerifyPayload(m, 1<<20); secrets.RefusalReason(err) != tc.reason {
				t.Fatalf("refused with %q (%v), want %s", secrets.RefusalReason(err), err, tc.reason)
			}
		})
	}
}

func TestATokenMirrorDecodesAsItsSource(t *testing.T) {
	tok := secrets.Token{Pool: "workers", Current: mustToken(t), RotatedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), PayloadHash: validPayload().Hash, RolloutHash: validPayload().Hash}
	s, err := secrets.NewTokenSecret("team-a", secrets.TokenSecretName("workers", tok.RolloutHash), tok)
	if err != nil {
		t.Fatal(err)
	}
	m := mirrorOf(t, s)
	got, err := secrets.DecodeToken(m)
	if err != nil || got != tok {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, tok)
	}
	o, err := secrets.OriginOf(m)
	if err != nil || o != (secrets.Origin{Namespace: "team-a", Pool: "workers", Name: s.Name, Owner: poolUID, Mirror: true}) {
		t.Errorf("origin %+v, %v", o, err)
	}
	if !secrets.MirrorHolds(m, mirrorOf(t, s)) {
		t.Error("a mirror does not hold what it was made of")
	}
}
