//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"nodepool.dev/nodepool/internal/secrets"
)

// bomb returns gzip of n zero bytes: about n/1000 bytes compressed.
func bomb(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for written := 0; written < n; written += len(chunk) {
		if _, err := zw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecompressionBombIsRefusedWithinTheLimit stores a payload Secret of
// well under 1 MiB that inflates to 512 MiB, for a pool whose token points
// at it, next to a real pool: the bomb is refused as too large, the real
// pool is served, and the index's own accounting holds the real payload
// only.
func TestDecompressionBombIsRefusedWithinTheLimit(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	const limit = 1 << 20
	ts := startServer(t, Options{Namespace: ns, Limits: IndexLimits{MaxPayloadBytes: limit}})
	good := createPool(t, e.Client, ns, "good", 64<<10)
	waitServes(t, ts, good.token.Current, good.payload.Ignition)
	before := ts.Index().Stats().Bytes
	if before <= 0 || before > 2*limit {
		t.Fatalf("the index accounts %d bytes for one 64 KiB payload", before)
	}

	uid := uuid.NewUUID()
	p := testPayload(ns, "bombed", "v1", 1<<10)
	for key, name := range map[string]string{secrets.KeyIgnition: "bombed-ignition", secrets.KeyFragments: "bombed-fragments"} {
		s := createPayloadNamed(t, e.Client, ns, name, p, uid, func(s *corev1.Secret) {
			s.Data[key] = bomb(t, 512<<20)
		})
		if n := len(s.Data[key]); n >= 1<<20 {
			t.Fatalf("the bomb is %d bytes compressed", n)
		}
	}
	tok := createTokenSecret(t, e.Client, ns, "bombed", "bombed-token", p.Hash, uid)
	waitStatus(t, ts, tok.Current, http.StatusServiceUnavailable)
	eventually(t, 30*time.Second, func() (bool, string) {
		got := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonTooLarge)
		return got == 2, fmt.Sprintf("ignored{reason=too_large} = %v, want 2", got)
	})
	if after := ts.Index().Stats().Bytes; after != before {
		t.Fatalf("the index holds %d bytes after the bombs, %d before", after, before)
	}
	if got := ts.metric(t, "nodepool_payload_server_index_bytes"); got != float64(before) {
		t.Errorf("gauge index_bytes = %v, want %d", got, before)
	}
	if status, body := ts.get(t, good.token.Current); status != http.StatusOK || !bytes.Equal(body, good.payload.Ignition) {
		t.Fatalf("the real pool got status %d after the bombs", status)
	}
}

func TestInflateStopsAtTheLimit(t *testing.T) {
	b := bomb(t, 64<<20)
	if _, err := secrets.Inflate(b, 1<<20); !errors.Is(err, secrets.ErrTooLarge) {
		t.Fatalf("a 64 MiB bomb inflated with a 1 MiB limit: %v", err)
	}
	ok := secrets.Gzip(bytes.Repeat([]byte("x"), 1<<20))
	if out, err := secrets.Inflate(ok, 1<<20); err != nil || len(out) != 1<<20 {
		t.Fatalf("exactly the limit: %d bytes, %v", len(out), err)
	}
	if _, err := secrets.Inflate(ok, 1<<20-1); !errors.Is(err, secrets.ErrTooLarge) {
		t.Fatalf("one byte past the limit: %v", err)
	}
	if _, err := secrets.Inflate([]byte("not gzip"), 1<<20); err == nil || errors.Is(err, secrets.ErrTooLarge) {
		t.Fatalf("not gzip: %v", err)
	}
	// A second member, which a multistream client (Go's, Ignition's) would
	// inflate and append, is refused.
	two := append(secrets.Gzip([]byte(`{}`)), secrets.Gzip([]byte(`{"forged":true}`))...)
	if _, err := secrets.Inflate(two, 1<<20); err == nil {
		t.Fatal("a gzip of two members was accepted")
	}
	if _, err := secrets.Inflate(append(secrets.Gzip([]byte(`{}`)), 0), 1<<20); err == nil {
		t.Fatal("a gzip with a trailing byte was accepted")
	}
}

func TestIndexBoundsPayloadsPerPoolAndBytes(t *testing.T) {
	var ignored []*IgnoredError
	onIgnored := func(e *IgnoredError) { ignored = append(ignored, e) }
	reasons := func() []string {
		var out []string
		for _, e := range ignored {
			out = append(out, e.Reason)
		}
		return out
	}
	upsert := func(ix *Index, p secrets.Payload) error {
		t.Helper()
		return ix.Upsert(payloadSecret(t, "n1", payloadName(p), p, "1"))
	}
	pa := func(i int) secrets.Payload { return testPayload("n1", "a", fmt.Sprint(i), 1<<10) }

	t.Run("per pool", func(t *testing.T) {
		ignored = nil
		ix := NewIndexWithLimits(IndexLimits{MaxPayloadsPerPool: 2, OnIgnored: onIgnored})
		for i := range 3 {
			err := upsert(ix, pa(i))
			if (i < 2) != (err == nil) {
				t.Fatalf("payload %d: %v", i, err)
			}
		}
		if err := upsert(ix, testPayload("n1", "b", "0", 1<<10)); err != nil {
			t.Fatalf("another pool is not limited by the first: %v", err)
		}
		if got := reasons(); len(got) != 1 || got[0] != ReasonPoolLimit {
			t.Fatalf("ignored %v", got)
		}
		if d := ix.Deferred(); len(d) != 1 || d[0].Name != payloadName(pa(2)) {
			t.Fatalf("deferred %v", d)
		}
		// A payload leaves: the deferred one fits.
		ix.Delete(types.NamespacedName{Namespace: "n1", Name: payloadName(pa(0))})
		if err := upsert(ix, pa(2)); err != nil {
			t.Fatal(err)
		}
		if st := ix.Stats(); st.PayloadSecrets != 3 || len(ix.Deferred()) != 0 {
			t.Fatalf("stats %+v, deferred %v", st, ix.Deferred())
		}
	})

	t.Run("per pool and controller", func(t *testing.T) {
		ignored = nil
		ix := NewIndexWithLimits(IndexLimits{MaxPayloadsPerPool: 1, OnIgnored: onIgnored})
		for i, owner := range []types.UID{"forged-1", "forged-1", "real"} {
			s := payloadSecret(t, "n1", payloadName(pa(i)), pa(i), "1")
			controlledBy(s, "a", owner)
			err := ix.Upsert(s)
			if (i != 1) != (err == nil) {
				t.Fatalf("payload %d of controller %s: %v", i, owner, err)
			}
		}
		if got := reasons(); len(got) != 1 || got[0] != ReasonPoolLimit {
			t.Fatalf("ignored %v: Secrets of another controller took the pool's slots", got)
		}
	})

	t.Run("bytes", func(t *testing.T) {
		ignored = nil
		one := testPayload("n1", "a", "0", 64<<10)
		pp := func(i int) secrets.Payload { return testPayload("n1", fmt.Sprintf("pool-%d", i), "0", 64<<10) }
		probe := NewIndex()
		if err := upsert(probe, one); err != nil {
			t.Fatal(err)
		}
		size := probe.Stats().Bytes
		ix := NewIndexWithLimits(IndexLimits{MaxBytes: 3*size + size/2, OnIgnored: onIgnored})
		var held int64
		for i := range 10 {
			err := upsert(ix, pp(i))
			if err == nil {
				held++
			}
			if st := ix.Stats(); st.Bytes > 3*size+size/2 {
				t.Fatalf("the index holds %d bytes, past its budget of %d", st.Bytes, 3*size+size/2)
			}
		}
		if held != 3 {
			t.Fatalf("%d payloads of %d bytes fit a budget of %d", held, size, 3*size+size/2)
		}
		for _, r := range reasons() {
			if r != ReasonIndexFull {
				t.Fatalf("ignored %v", reasons())
			}
		}
		for i := range 10 {
			ix.Delete(types.NamespacedName{Namespace: "n1", Name: payloadName(pp(i))})
		}
		if st := ix.Stats(); st.Bytes != 0 || st.PayloadSecrets != 0 {
			t.Fatalf("stats after deleting every payload %+v", st)
		}
	})
}

func TestTransformKeepsOnlyWhatTheIndexReads(t *testing.T) {
	p := testPayload("n1", "a", "v1", 1<<10)
	s := payloadSecret(t, "n1", payloadName(p), p, "1")
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{...everything...}"
	s.Data["extra"] = bytes.Repeat([]byte("x"), 1<<10)
	tok := tokenSecretObj(t, "n1", "a-token", secrets.Token{Pool: "a", Current: newToken(t), RotatedAt: time.Now(), PayloadHash: p.Hash}, "1")
	tok.Annotations = map[string]string{secrets.AnnotationFirstFetch: "2026-01-01T00:00:00Z", "other": "x"}
	tok.Data["extra"] = []byte("x")
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{secrets.LabelKind: "unknown"}}, Data: map[string][]byte{"k": []byte("v")}}
	for _, obj := range []*corev1.Secret{s, tok, other} {
		if _, err := TransformSecret(obj); err != nil {
			t.Fatal(err)
		}
	}
	if s.ManagedFields != nil || len(s.Annotations) != 1 || len(s.Data) != 3 {
		t.Fatalf("payload Secret after the transform: %d managed fields, annotations %v, %d keys", len(s.ManagedFields), s.Annotations, len(s.Data))
	}
	if _, ok := tok.Annotations[secrets.AnnotationFirstFetch]; !ok || len(tok.Annotations) != 1 || len(tok.Data) != 3 {
		t.Fatalf("token Secret after the transform: annotations %v, %d keys", tok.Annotations, len(tok.Data))
	}
	if len(other.Data) != 0 {
		t.Fatalf("a Secret of another kind keeps %d keys", len(other.Data))
	}
	ix := NewIndex()
	if err := ix.Upsert(s); err != nil {
		t.Fatalf("the transformed payload Secret does not index: %v", err)
	}
	if err := ix.Upsert(tok); err != nil {
		t.Fatalf("the transformed token Secret does not index: %v", err)
	}
	if m, ok := ix.Lookup(string(tok.Data[secrets.KeyToken])); !ok || m.Payload == nil || !m.FirstFetchRecorded {
		t.Fatal("the transformed Secrets do not resolve")
	}
}

// TestPayloadRefusedForThePoolLimitIsServedOnceThereIsRoom: with room for
// one payload per pool, a second one is refused until the first is deleted,
// and then indexed without changing.
func TestPayloadRefusedForThePoolLimitIsServedOnceThereIsRoom(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns, Limits: IndexLimits{MaxPayloadsPerPool: 1}})
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	next := testPayload(ns, "workers", "v2", 4<<10)
	createPayload(t, e.Client, ns, next, p.uid)
	updateToken(t, e.Client, p, func(tok secrets.Token) secrets.Token { tok.PayloadHash = next.Hash; return tok })
	waitStatus(t, ts, p.token.Current, http.StatusServiceUnavailable)
	if got := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonPoolLimit); got != 1 {
		t.Fatalf("ignored{reason=pool_limit} = %v, want 1", got)
	}
	if err := e.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers-payload-" + p.payload.Hash[:16]}}); err != nil {
		t.Fatal(err)
	}
	waitServes(t, ts, p.token.Current, next.Ignition)
}

// TestIndexTransformVerifiesOnTheWayIn: the informer's transform checks a
// payload Secret's content and drops its fragments and manifest; the index
// serves the stripped object by that verdict, for that version only.
func TestIndexTransformVerifiesOnTheWayIn(t *testing.T) {
	var ignored []string
	ix := NewIndexWithLimits(IndexLimits{OnIgnored: func(e *IgnoredError) { ignored = append(ignored, e.Reason) }})
	p := testPayload("n1", "a", "v1", 8<<10)
	s := payloadSecret(t, "n1", payloadName(p), p, "1")
	s.UID = "uid-1"
	if _, err := ix.Transform(s); err != nil {
		t.Fatal(err)
	}
	if len(s.Data) != 1 || s.Data[secrets.KeyIgnition] == nil {
		t.Fatalf("the transformed payload Secret keeps %d keys", len(s.Data))
	}
	if err := ix.Upsert(s); err != nil {
		t.Fatalf("the verified, stripped Secret is refused: %v", err)
	}
	tok := newToken(t)
	if err := ix.Upsert(tokenSecretObj(t, "n1", "a-token", secrets.Token{Pool: "a", Current: tok, RotatedAt: time.Now(), PayloadHash: p.Hash}, "1")); err != nil {
		t.Fatal(err)
	}
	if m, _ := ix.Lookup(tok); m.Payload == nil || !bytes.Equal(m.Payload.JSON, p.Ignition) {
		t.Fatal("the verified payload is not served")
	}

	// Another version of the stripped object, not seen by the transform:
	// its content cannot be checked, so it is refused.
	other := s.DeepCopy()
	other.ResourceVersion = "2"
	if err := ix.Upsert(other); err == nil {
		t.Fatal("a stripped Secret without a verdict was indexed")
	}
	if m, _ := ix.Lookup(tok); m.Payload != nil {
		t.Fatal("a stripped Secret without a verdict is served")
	}

	// A forgery is refused by the transform, for the reason it found, and
	// the cache keeps none of its data.
	forged := payloadSecret(t, "n1", "aaa-forged", p, "3")
	forged.UID = "uid-2"
	forged.Data[secrets.KeyIgnition] = secrets.Gzip(composePayload("a", forgedMarker, 1<<10).Ignition)
	if _, err := ix.Transform(forged); err != nil {
		t.Fatal(err)
	}
	if len(forged.Data) != 0 {
		t.Fatalf("the cache keeps %d keys of a refused payload Secret", len(forged.Data))
	}
	var ign *IgnoredError
	if err := ix.Upsert(forged); !errors.As(err, &ign) || ign.Reason != ReasonContentMismatch {
		t.Fatalf("the forgery: %v, want %s", err, ReasonContentMismatch)
	}
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: "aaa-forged"})
	ix.Delete(types.NamespacedName{Namespace: "n1", Name: payloadName(p)})
	if len(ix.verdicts.byName) != 0 {
		t.Fatalf("%d verdicts kept after the Secrets are deleted", len(ix.verdicts.byName))
	}
}

func TestIndexTransformIsIdempotent(t *testing.T) {
	ix := NewIndex()
	p := testPayload("n1", "a", "v1", 1<<10)
	s := payloadSecret(t, "n1", payloadName(p), p, "1")
	s.UID = "uid-1"
	for range 3 {
		if _, err := ix.Transform(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Upsert(s); err != nil {
		t.Fatalf("a Secret transformed three times is refused: %v", err)
	}
}

// TestVerdictOfASecretCreatedAgainSurvivesTheOldDeletion: the informer may
// transform a payload Secret created again under its name before the
// deletion of the old one is handled.
func TestVerdictOfASecretCreatedAgainSurvivesTheOldDeletion(t *testing.T) {
	ix := NewIndex()
	p := testPayload("n1", "a", "v1", 1<<10)
	old := payloadSecret(t, "n1", payloadName(p), p, "1")
	old.UID = "uid-1"
	again := payloadSecret(t, "n1", payloadName(p), p, "2")
	again.UID = "uid-2"
	for _, s := range []*corev1.Secret{old, again} {
		if _, err := ix.Transform(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Upsert(old); err != nil {
		t.Fatal(err)
	}
	ix.DeleteIncarnation(types.NamespacedName{Namespace: "n1", Name: payloadName(p)}, old.UID)
	if err := ix.Upsert(again); err != nil {
		t.Fatalf("the Secret created again lost its verdict with the old one: %v", err)
	}
	if st := ix.Stats(); st.PayloadSecrets != 1 {
		t.Fatalf("stats %+v", st)
	}
}
