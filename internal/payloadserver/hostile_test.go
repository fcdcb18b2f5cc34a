//go:build !fuzzonly

package payloadserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFailureLimiterSlowsFailuresOnly: past its burst, a source's failed
// attempts are held, whatever failed; a valid token from the same source
// is never held; another source is not affected; every failure gets the
// same answer, held or not.
func TestFailureLimiterSlowsFailuresOnly(t *testing.T) {
	ix, pools := memIndex(t)
	lim := NewFailureLimiter(FailureLimits{PerSecond: 1, Burst: 3, MaxDelay: 2 * time.Second, Sources: 2})
	var mu sync.Mutex
	var held []time.Duration
	lim.sleep = func(d time.Duration, _ <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, d)
	}
	heldCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, ix)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(ix, HandlerOptions{Metrics: m, Failures: lim})
	get := func(source, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "https://x"+IgnitionPath, nil)
		req.RemoteAddr = source + ":40000"
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	failures := []string{"", "Bearer " + newToken(t), "Bearer " + fuzzTokenRemoved, "Basic eA==", "Bearer x"}
	var answers []string
	answer := func(rec *httptest.ResponseRecorder) string {
		return fmt.Sprintf("%d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
	for i := range 20 {
		answers = append(answers, answer(get("10.0.0.1", failures[i%len(failures)])))
	}
	if got := heldCount(); got != 20-3 {
		t.Fatalf("%d of 20 failures held with a burst of 3, want 17", got)
	}
	for _, d := range held {
		if d <= 0 || d > 2*time.Second {
			t.Fatalf("a failure held %s, outside (0, MaxDelay]", d)
		}
	}
	for i, a := range answers {
		if a != answers[0] {
			t.Fatalf("failure %d answered %s, failure 0 %s", i, a, answers[0])
		}
	}

	// The same source with valid tokens, many times: never held.
	before := heldCount()
	for range 1000 {
		for tok, p := range pools {
			if rec := get("10.0.0.1", "Bearer "+tok); rec.Code != http.StatusOK || rec.Body.String() != string(p.payload.Ignition) {
				t.Fatalf("a valid token from a limited source got %d", rec.Code)
			}
		}
	}
	if got := heldCount(); got != before {
		t.Fatalf("%d valid requests were held", got-before)
	}

	// Another source starts with its own burst.
	for range 3 {
		get("10.0.0.2", "")
	}
	if got := heldCount(); got != before {
		t.Fatalf("another source was held (%d)", got-before)
	}
	// Sources are bounded (2): a third pushes out the least recently seen
	// (10.0.0.1), which starts again with a full burst.
	get("10.0.0.3", "")
	get("10.0.0.1", "")
	if got := heldCount(); got != before {
		t.Fatalf("a forgotten source was held (%d)", got-before)
	}
	if lim.sources.Len() > 2 {
		t.Fatalf("%d sources tracked, bound 2", lim.sources.Len())
	}
	if got := metricValue(t, reg, "nodepool_payload_server_delayed_failures_total"); got != 17 {
		t.Errorf("delayed_failures_total = %v, want 17", got)
	}
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	ts := &testServer{registry: reg}
	return ts.metric(t, name)
}

// TestSlowAndOversizedRequestsAreCut: over real TLS, a client that sends
// its headers a line at a time, or opens a connection and sends nothing,
// is disconnected after the read-header timeout; headers past the limit
// get 431; a normal request still gets its payload.
func TestSlowAndOversizedRequestsAreCut(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	const timeout = time.Second
	ts := startServer(t, Options{Namespace: ns, ReadHeaderTimeout: timeout, MaxHeaderBytes: 4 << 10})
	p := createPool(t, e.Client, ns, "workers", 1<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)

	// cut fails unless the server closes conn, as a read sees it, before
	// the client would stop on its own (60s), and without answering.
	cut := func(t *testing.T, conn net.Conn, trickle bool) {
		t.Helper()
		stop := make(chan struct{})
		defer close(stop)
		if trickle {
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := fmt.Fprintf(conn, "X-Slow-%d: y\r\n", i); err != nil {
						return
					}
				}
			}()
		}
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		start := time.Now()
		got, err := io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open for %s", time.Since(start).Round(time.Second))
		}
		if strings.Contains(string(got), "HTTP/1.1 200") || strings.Contains(string(got), marker) {
			t.Fatal("the server answered a request whose headers never ended")
		}
	}

	t.Run("headers a line at a time", func(t *testing.T) {
		conn, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{RootCAs: ts.ca.Pool(), NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		if _, err := io.WriteString(conn, "GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+p.token.Current+"\r\n"); err != nil {
			t.Fatal(err)
		}
		cut(t, conn, true)
	})
	t.Run("no TLS handshake", func(t *testing.T) {
		conn, err := net.Dial("tcp", ts.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		cut(t, conn, false)
	})
	t.Run("handshake, then nothing", func(t *testing.T) {
		conn, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{RootCAs: ts.ca.Pool(), NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		cut(t, conn, false)
	})
	t.Run("headers past the limit", func(t *testing.T) {
		status, body, _, err := ts.do(http.MethodGet, IgnitionPath, http.Header{
			"Authorization": {"Bearer " + p.token.Current}, "X-Big": {strings.Repeat("x", 16<<10)},
		})
		if err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, %v", status, err)
		}
		if strings.Contains(string(body), marker) {
			t.Fatal("payload bytes in the 431")
		}
	})
	t.Run("a normal request", func(t *testing.T) {
		status, body, _, err := ts.do(http.MethodGet, IgnitionPath, http.Header{
			"Authorization": {"Bearer " + p.token.Current}, "X-Small": {strings.Repeat("x", 1<<10)},
		})
		if err != nil || status != http.StatusOK || string(body) != string(p.payload.Ignition) {
			t.Fatalf("status %d, %v", status, err)
		}
	})
}

// TestOnlyModernTLSIsNegotiated: TLS 1.2 with forward-secret AEAD suites
// works; TLS 1.2 offering only CBC or static-RSA suites is refused (older
// versions are refused too, see TestBadRequestsNeverGetThePayload).
func TestOnlyModernTLSIsNegotiated(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	dial := func(suites []uint16) (*tls.ConnectionState, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", ts.Addr().String(), &tls.Config{
			RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: suites,
		})
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		return &st, nil
	}
	if st, err := dial([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}); err != nil || st.Version != tls.VersionTLS12 {
		t.Fatalf("TLS 1.2 with ECDHE and AES-GCM: %v", err)
	}
	for name, suites := range map[string][]uint16{
		"CBC":        {tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA},
		"static RSA": {tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384},
	} {
		if _, err := dial(suites); err == nil {
			t.Errorf("a TLS 1.2 client offering only %s suites was accepted", name)
		}
	}
	// A new connection after all that still works.
	resp, err := ts.client.Get(ts.url + IgnitionPath)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNetworkAuthenticationRequired {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
