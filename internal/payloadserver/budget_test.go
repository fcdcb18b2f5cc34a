//go:build !fuzzonly

package payloadserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/secrets"
)

// payloadBytes is what the index accounts for payload p (inflated JSON and
// gzip).
func payloadBytes(t testing.TB, p secrets.Payload) int64 {
	t.Helper()
	ix := NewIndex()
	if err := ix.Upsert(payloadSecret(t, "n1", payloadName(p), p, "1")); err != nil {
		t.Fatal(err)
	}
	return ix.Stats().Bytes
}

// noisyPayload is a self-consistent payload of pool whose Ignition config
// carries about size random hex characters, so its gzip is about half its
// inflated size (a padded test payload compresses to almost nothing).
func noisyPayload(pool string, size int) secrets.Payload {
	b := make([]byte, size/2)
	_, _ = rand.Read(b)
	return composePayload(pool, "noise-"+hex.EncodeToString(b), 0)
}

// TestOneNamespaceCannotDenyPayloadsToAnother: namespace A fills with
// self-consistent payload Secrets of invented pools, far past what the
// index holds; a genuine pool's payload in namespace B is still served, A
// holds no more than its share, and each Secret refused is counted once.
func TestOneNamespaceCannotDenyPayloadsToAnother(t *testing.T) {
	e := testEnv(t)
	a, b := e.NewNamespace(t), e.NewNamespace(t)
	const size = 16 << 10
	one := payloadBytes(t, testPayload(a, "invented-00", "v1", size))
	maxBytes := 10 * one
	ts := startServer(t, Options{Namespaces: []string{a, b}, Limits: IndexLimits{MaxBytes: maxBytes}})

	const invented = 30
	for i := range invented {
		pool := fmt.Sprintf("invented-%02d", i)
		p := testPayload(a, pool, "v1", size)
		uid := uuid.NewUUID()
		createPayload(t, e.Client, a, p, uid)
		createTokenSecret(t, e.Client, a, pool, pool+"-token", p.Hash, uid)
	}
	refused := func() float64 {
		return ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonNamespaceFull) +
			ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonIndexFull)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		st := ts.Index().Stats()
		return float64(st.PayloadSecrets)+refused() == invented, fmt.Sprintf("%d payloads indexed, %v refused, of %d", st.PayloadSecrets, refused(), invented)
	})
	if got := ts.Index().Stats().Bytes; got > maxBytes/2 {
		t.Errorf("namespace %s holds %d bytes of the index's %d: more than its share of two namespaces", a, got, maxBytes)
	}

	genuine := createPool(t, e.Client, b, "workers", size)
	waitServes(t, ts, genuine.token.Current, genuine.payload.Ignition)
	if got := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonIndexFull); got != 0 {
		t.Errorf("ignored{reason=index_full} = %v: the index filled up, want namespace A refused for its share", got)
	}
	if got, want := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonNamespaceFull), float64(invented-ts.Index().Stats().PayloadSecrets+1); got != want {
		t.Errorf("ignored{reason=namespace_full} = %v, want %v (each refused Secret once)", got, want)
	}
}

// cachedPayloadData counts the bytes of payload data the informer's store
// holds, and the names of the payload Secrets that hold any.
func cachedPayloadData(t testing.TB, ts *testServer, ns string) (int64, []types.NamespacedName) {
	t.Helper()
	var list corev1.SecretList
	if err := ts.cache.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var n int64
	var holding []types.NamespacedName
	for _, s := range list.Items {
		if secrets.KindOf(&s) != secrets.KindPayload {
			continue
		}
		var held int64
		for _, v := range s.Data {
			held += int64(len(v))
		}
		if held > 0 {
			n += held
			holding = append(holding, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
		}
	}
	return n, holding
}

// TestTheCacheHoldsOnlyThePayloadsTheIndexAdmits: with more verified
// payload Secrets than the index's budget admits, the informer's store
// keeps the payload data of the admitted ones only, within the index's
// limits; once one leaves, a refused one is admitted and served.
func TestTheCacheHoldsOnlyThePayloadsTheIndexAdmits(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	const size = 16 << 10
	one := payloadBytes(t, noisyPayload("probe", size))
	maxBytes := 3*one + one/2
	ts := startServer(t, Options{Namespace: ns, Limits: IndexLimits{MaxBytes: maxBytes}})

	const total = 20
	pools := make([]*testPool, total)
	for i := range total {
		name := fmt.Sprintf("pool-%02d", i)
		uid := uuid.NewUUID()
		p := noisyPayload(name, size)
		createPayload(t, e.Client, ns, p, uid)
		tok := createTokenSecret(t, e.Client, ns, name, name+"-token", p.Hash, uid)
		pools[i] = &testPool{ns: ns, name: name, uid: uid, token: tok, payload: p}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		st := ts.Index().Stats()
		refused := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", ReasonIndexFull)
		return float64(st.PayloadSecrets)+refused == total, fmt.Sprintf("%d payloads indexed, %v refused, of %d", st.PayloadSecrets, refused, total)
	})
	check := func() {
		t.Helper()
		st := ts.Index().Stats()
		if st.PayloadSecrets != 3 {
			t.Fatalf("%d payloads indexed, want 3 within %d bytes", st.PayloadSecrets, maxBytes)
		}
		held, holding := cachedPayloadData(t, ts, ns)
		if held > st.Bytes || held > maxBytes {
			t.Errorf("the cache holds %d bytes of payload data in %d Secrets; the index holds %d bytes (budget %d)", held, len(holding), st.Bytes, maxBytes)
		}
		for _, n := range holding {
			ts.Index().mu.RLock()
			_, indexed := ts.Index().payloadSecrets[n]
			ts.Index().mu.RUnlock()
			if !indexed {
				t.Errorf("the cache holds the payload data of %s, which the index did not admit", n)
			}
		}
	}
	check()

	// One admitted payload leaves: a refused one takes its place, read
	// again from the API server, and is served.
	served := -1
	for i, p := range pools {
		if status, _ := ts.get(t, p.token.Current); status == 200 {
			served = i
			break
		}
	}
	if served < 0 {
		t.Fatal("no pool is served")
	}
	if err := e.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: payloadName(pools[served].payload)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		n := 0
		for i, p := range pools {
			if i == served {
				continue
			}
			if status, _ := ts.get(t, p.token.Current); status == 200 {
				n++
			}
		}
		return n == 3, fmt.Sprintf("%d pools served, want 3", n)
	})
	check()
}

func TestNamespaceShareDividesTheBudget(t *testing.T) {
	for _, c := range []struct {
		namespaces int
		want       int64
	}{{0, 64 << 20}, {1, 512 << 20}, {2, 256 << 20}, {16, 32 << 20}} {
		if got := NamespaceShare(512<<20, c.namespaces); got != c.want {
			t.Errorf("NamespaceShare(512 MiB, %d) = %d, want %d", c.namespaces, got, c.want)
		}
	}
}

// TestANamespaceIsRefusedPastItsShare: an index with room for four
// payloads, two per namespace, refuses a third of one namespace as
// namespace_full, admits those of the others, and says index_full only
// when the whole budget is held.
func TestANamespaceIsRefusedPastItsShare(t *testing.T) {
	var ignored []string
	p := func(ns string, i int) secrets.Payload { return testPayload(ns, fmt.Sprintf("pool-%d", i), "v1", 8<<10) }
	size := payloadBytes(t, p("n1", 0))
	ix := NewIndexWithLimits(IndexLimits{
		MaxBytes: 4*size + size/2, MaxNamespaceBytes: 2*size + size/2,
		OnIgnored: func(e *IgnoredError) { ignored = append(ignored, e.Secret.Namespace+":"+e.Reason) },
	})
	for _, ns := range []string{"n1", "n2", "n3"} {
		for i := range 3 {
			_ = ix.Upsert(payloadSecret(t, ns, payloadName(p(ns, i)), p(ns, i), "1"))
		}
	}
	want := []string{"n1:" + ReasonNamespaceFull, "n2:" + ReasonNamespaceFull, "n3:" + ReasonIndexFull, "n3:" + ReasonIndexFull, "n3:" + ReasonIndexFull}
	if fmt.Sprint(ignored) != fmt.Sprint(want) {
		t.Fatalf("ignored %v, want %v", ignored, want)
	}
	if st := ix.Stats(); st.PayloadSecrets != 4 || st.Bytes > 4*size+size/2 {
		t.Fatalf("stats %+v", st)
	}
	// An n2 payload leaves: n2's refused one fits again, and fills the
	// index; n1 stays at its share.
	ix.Delete(types.NamespacedName{Namespace: "n2", Name: payloadName(p("n2", 0))})
	got := ix.Admissible()
	if len(got) != 1 || got[0] != (types.NamespacedName{Namespace: "n2", Name: payloadName(p("n2", 2))}) {
		t.Fatalf("admissible %v, want n2's refused payload only", got)
	}
}

// TestTheTransformKeepsTheDataOfAdmittedPayloadsOnly: the informer's
// transform reserves room for what it keeps; a payload past the budget is
// cached without data, deferred when its event is handled, and indexed
// from a copy read again once there is room.
func TestTheTransformKeepsTheDataOfAdmittedPayloadsOnly(t *testing.T) {
	p := func(i int) secrets.Payload { return noisyPayload(fmt.Sprintf("pool-%d", i), 8<<10) }
	size := payloadBytes(t, p(0))
	var ignored []string
	ix := NewIndexWithLimits(IndexLimits{MaxBytes: 2*size + size/2, OnIgnored: func(e *IgnoredError) { ignored = append(ignored, e.Reason) }})
	payloads := make([]secrets.Payload, 5)
	cached := make([]*corev1.Secret, 5)
	for i := range cached {
		payloads[i] = p(i)
		s, err := secrets.NewPayloadSecret("n1", payloadName(payloads[i]), payloads[i])
		if err != nil {
			t.Fatal(err)
		}
		s.UID, s.ResourceVersion = types.UID(fmt.Sprint("uid-", i)), "1"
		cached[i] = s
		// All transformed before any event is handled, as an informer's
		// list does.
		if _, err := ix.Transform(s); err != nil {
			t.Fatal(err)
		}
	}
	var kept int64
	for _, s := range cached {
		for _, v := range s.Data {
			kept += int64(len(v))
		}
	}
	if st := ix.Stats(); kept > st.Bytes || st.Bytes > 2*size+size/2 {
		t.Fatalf("the cache keeps %d bytes, the index holds %d of %d", kept, st.Bytes, 2*size+size/2)
	}
	for _, s := range cached {
		_ = ix.Upsert(s)
	}
	if st := ix.Stats(); st.PayloadSecrets != 2 || len(ix.Deferred()) != 3 || len(ignored) != 3 {
		t.Fatalf("stats %+v, deferred %v, ignored %v", st, ix.Deferred(), ignored)
	}
	// A resync of the cached copies changes nothing and reports nothing.
	for _, s := range cached {
		_ = ix.Upsert(s)
	}
	if st := ix.Stats(); st.PayloadSecrets != 2 || len(ix.Deferred()) != 3 || len(ignored) != 3 {
		t.Fatalf("after a resync: stats %+v, deferred %v, ignored %v", st, ix.Deferred(), ignored)
	}
	ix.DeleteIncarnation(types.NamespacedName{Namespace: "n1", Name: cached[0].Name}, cached[0].UID)
	adm := ix.Admissible()
	if len(adm) != 1 {
		t.Fatalf("admissible %v, want one", adm)
	}
	for i, s := range cached {
		if s.Name != adm[0].Name {
			continue
		}
		whole, err := secrets.NewPayloadSecret("n1", s.Name, payloads[i])
		if err != nil {
			t.Fatal(err)
		}
		whole.UID, whole.ResourceVersion = s.UID, s.ResourceVersion
		if err := ix.Readmit(whole); err != nil {
			t.Fatalf("readmitting %s: %v", s.Name, err)
		}
	}
	if st := ix.Stats(); st.PayloadSecrets != 2 || len(ix.Deferred()) != 2 || len(ignored) != 3 {
		t.Fatalf("after a readmission: stats %+v, deferred %v, ignored %v", st, ix.Deferred(), ignored)
	}
	for _, s := range cached {
		ix.DeleteIncarnation(types.NamespacedName{Namespace: "n1", Name: s.Name}, s.UID)
	}
	if st := ix.Stats(); st.Bytes != 0 || len(ix.pending) != 0 || len(ix.nsBytes) != 0 || len(ix.perPool) != 0 {
		t.Fatalf("after deleting all: stats %+v, %d pending", st, len(ix.pending))
	}
}
