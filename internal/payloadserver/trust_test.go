//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"nodepool.dev/nodepool/internal/secrets"
)

// logLines is a logger that keeps every line it writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

// count returns how many lines contain every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// forgedMarker is in the Ignition of every forged payload and in nothing
// the controller writes.
const forgedMarker = "FORGED-BY-AN-ATTACKER"

// TestForgedPayloadSecretsAreNeverServed creates, next to a pool's real
// payload Secret, labelled payload Secrets for the same pool and hash whose
// names sort first, each forged another way, and checks that none is ever
// served: not while the real one exists, not once it is gone, and not by a
// server started afterwards (which lists them in name order).
func TestForgedPayloadSecretsAreNeverServed(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	const pool = "workers"
	uid := uuid.NewUUID()
	real := testPayload(ns, pool, "v1", 4<<10)
	forgedContent := composePayload(pool, forgedMarker, 4<<10)

	var log logLines
	ts := startServer(t, Options{Namespace: ns, Logger: log.logger()})

	forgeries := map[string]struct {
		p      secrets.Payload
		owner  types.UID
		mut    func(*corev1.Secret)
		reason string
	}{
		// Other fragments claiming the real hash: the hash recomputed from
		// the pool and manifest is not the one claimed.
		"aaa-other-fragments": {p: withHash(forgedContent, real.Hash), owner: uid, reason: ReasonHashMismatch},
		// The real fragments and manifest, another Ignition config.
		"aaa-other-ignition": {p: real, owner: uid, mut: func(s *corev1.Secret) {
			s.Data[secrets.KeyIgnition] = secrets.Gzip(forgedContent.Ignition)
		}, reason: ReasonContentMismatch},
		// Forged fragments under the real manifest.
		"aaa-fragments-not-in-manifest": {p: real, owner: uid, mut: func(s *corev1.Secret) {
			s.Data[secrets.KeyIgnition] = secrets.Gzip(forgedContent.Ignition)
			s.Data[secrets.KeyFragments] = mustSecret(t, ns, forgedContent).Data[secrets.KeyFragments]
		}, reason: ReasonContentMismatch},
		// The real Ignition config followed by a second gzip member, which
		// a client inflating every member would append.
		"aaa-second-gzip-member": {p: real, owner: uid, mut: func(s *corev1.Secret) {
			s.Data[secrets.KeyIgnition] = append(s.Data[secrets.KeyIgnition], secrets.Gzip(forgedContent.Ignition)...)
		}, reason: ReasonInvalid},
		// Controlled by something other than the NodePool of its label.
		"aaa-controlled-by-another-pool-name": {p: real, mut: func(s *corev1.Secret) {
			controlledBy(s, "someone-else", uid)
		}, reason: ReasonNotOwned},
		// Exact copies of the real content under another name: not
		// controlled, controlled by another incarnation of the pool, or by
		// the pool itself. Only the Secret of the payload's name is ever
		// served (shown once the real Secret is gone).
		"aaa-copy-not-owned":            {p: real, reason: ReasonNameMismatch},
		"aaa-copy-owned-by-another-uid": {p: real, owner: uuid.NewUUID(), reason: ReasonNameMismatch},
		"aaa-copy-owned-by-the-pool":    {p: real, owner: uid, reason: ReasonNameMismatch},
	}
	for name, f := range forgeries {
		createPayloadNamed(t, e.Client, ns, name, f.p, f.owner, f.mut)
	}
	// The real Secrets, created after the forgeries.
	createPayload(t, e.Client, ns, real, uid)
	tok := createTokenSecret(t, e.Client, ns, pool, pool+"-token-0123456789abcdef", real.Hash, uid)

	waitServes(t, ts, tok.Current, real.Ignition)
	for range 20 {
		if status, body := ts.get(t, tok.Current); status != http.StatusOK || !bytes.Equal(body, real.Ignition) {
			t.Fatalf("status %d, %d bytes: not the real payload", status, len(body))
		}
	}
	wantIgnored := map[string]float64{}
	for _, f := range forgeries {
		wantIgnored[f.reason]++
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		for reason, want := range wantIgnored {
			if got := ts.metric(t, "nodepool_payload_server_ignored_payloads_total", "reason", reason); got != want {
				return false, fmt.Sprintf("ignored{reason=%q} = %v, want %v", reason, got, want)
			}
		}
		return true, ""
	})

	// The real payload Secret goes: no forgery takes its place.
	if err := e.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metaOf(types.NamespacedName{Namespace: ns, Name: pool + "-payload-" + real.Hash[:16]})}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ts, tok.Current, http.StatusServiceUnavailable)

	// A server started now lists the forgeries first, by name, and still
	// serves none of them.
	var log2 logLines
	ts2 := startServer(t, Options{Namespace: ns, Logger: log2.logger()})
	for range 20 {
		if status, body := ts2.get(t, tok.Current); status != http.StatusServiceUnavailable || bytes.Contains(body, []byte(marker)) {
			t.Fatalf("after a restart without the real Secret: status %d, %d bytes", status, len(body))
		}
	}
	// The real one back: served by both, forgeries still not.
	createPayload(t, e.Client, ns, real, uid)
	waitServes(t, ts2, tok.Current, real.Ignition)
	waitServes(t, ts, tok.Current, real.Ignition)

	// Each forgery was logged once per server, by name, without content.
	for _, l := range []*logLines{&log, &log2} {
		for name := range forgeries {
			if n := l.count("not serving a payload Secret", `"name"="`+name+`"`, `"namespace"="`+ns+`"`); n != 1 {
				t.Errorf("%s logged %d times, want once:\n%s", name, n, l.all())
			}
		}
		for _, secret := range []string{forgedMarker, marker, tok.Current} {
			if n := l.count(secret); n != 0 {
				t.Errorf("the log holds payload content or a token (%d lines)", n)
			}
		}
	}
}

func withHash(p secrets.Payload, hash string) secrets.Payload {
	p.Hash = hash
	return p
}

func mustSecret(t testing.TB, ns string, p secrets.Payload) *corev1.Secret {
	t.Helper()
	s, err := secrets.NewPayloadSecret(ns, "x", p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
