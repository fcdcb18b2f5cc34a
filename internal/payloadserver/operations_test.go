//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	"nodepool.dev/nodepool/internal/secrets"
)

func metaOf(n types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name}
}

// TestAcceptedAuthorizationForms pins the forms of a valid header that are
// served: the scheme is case-insensitive (RFC 9110 §11.1), one or more
// spaces may follow it (RFC 6750 §2.1), and whitespace around the value is
// not part of it (RFC 9110 §5.5), so HTTP strips it before the handler.
func TestAcceptedAuthorizationForms(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	tok := p.token.Current
	waitServes(t, ts, tok, p.payload.Ignition)
	for _, value := range []string{
		"Bearer " + tok,
		"bearer " + tok,
		"BEARER " + tok,
		"Bearer    " + tok,
		"Bearer " + tok + "   ",
		"Bearer " + tok + "\t",
		"   Bearer " + tok,
	} {
		t.Run(fmt.Sprintf("%q", strings.ReplaceAll(value, tok, "<token>")), func(t *testing.T) {
			status, body, err := ts.raw(t, "GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: "+value+"\r\nConnection: close\r\n\r\n")
			if err != nil || status != http.StatusOK || !bytes.Equal(body, p.payload.Ignition) {
				t.Fatalf("status %d, %v", status, err)
			}
		})
	}
	t.Run("HTTP/2", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool()}, ForceAttemptHTTP2: true}}
		req, _ := http.NewRequest(http.MethodGet, ts.url+IgnitionPath, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body) // the client inflates gzip itself
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || !bytes.Equal(body, p.payload.Ignition) {
			t.Fatalf("%s status %d", resp.Proto, resp.StatusCode)
		}
	})
}

func TestConcurrentFetchesAcross50PoolsGetTheirOwnBytes(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	const pools, fetches = 50, 500
	ps := make([]*testPool, pools)
	for i := range ps {
		ps[i] = createPool(t, e.Client, ns, fmt.Sprintf("pool-%02d", i), 16<<10)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		st := ts.Index().Stats()
		return st.TokenSecrets == pools && st.PayloadSecrets == pools, fmt.Sprintf("%+v", st)
	})
	// Half the clients ask for gzip (and inflate), as Ignition does; half
	// for identity.
	identity := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool()}, MaxIdleConnsPerHost: fetches, DisableCompression: true}
	gz := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool()}, MaxIdleConnsPerHost: fetches}
	defer identity.CloseIdleConnections()
	defer gz.CloseIdleConnections()
	start := make(chan struct{})
	var wg sync.WaitGroup
	var wrong, failed atomic.Int32
	errs := make(chan error, fetches)
	for i := range fetches {
		p := ps[i%pools]
		tr := identity
		if i%2 == 1 {
			tr = gz
		}
		c := &http.Client{Transport: tr, Timeout: 60 * time.Second}
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodGet, ts.url+IgnitionPath, nil)
			req.Header.Set("Authorization", "Bearer "+p.token.Current)
			resp, err := c.Do(req)
			if err != nil {
				failed.Add(1)
				errs <- err
				return
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
				errs <- fmt.Errorf("status %d, %v", resp.StatusCode, err)
				return
			}
			if !bytes.Equal(body, p.payload.Ignition) {
				wrong.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	if wrong.Load() > 0 {
		t.Errorf("%d of %d fetches got bytes other than their pool's payload", wrong.Load(), fetches)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d fetches failed, first: %v", n, fetches, <-errs)
	}
	if got := ts.metric(t, "nodepool_payload_server_requests_total", "result", "served"); got != fetches {
		t.Errorf("served = %v, want %d", got, fetches)
	}
}

func TestFirstFetchIsRecordedOnceAndRetried(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	base, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	const failures = 2
	opts := Options{Namespace: ns, patchClient: interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patches.Add(1) <= failures {
				return errors.New("injected failure")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})}
	ts := startServer(t, opts)
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	// Before any fetch nothing is recorded.
	before := time.Now().Add(-time.Second).Truncate(time.Second)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	for range 20 {
		if status, _ := ts.get(t, p.token.Current); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	var recorded string
	eventually(t, 20*time.Second, func() (bool, string) {
		var s corev1.Secret
		if err := e.Client.Get(context.Background(), p.tokenSecret, &s); err != nil {
			return false, err.Error()
		}
		recorded = s.Annotations[secrets.AnnotationFirstFetch]
		return recorded != "", "no annotation yet"
	})
	at, err := time.Parse(time.RFC3339, recorded)
	if err != nil || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("first fetch recorded as %q (%v)", recorded, err)
	}
	// Once the index sees the annotation, fetches no longer reach the
	// recorder; a rotated token of the same Secret does not record again.
	eventually(t, 10*time.Second, func() (bool, string) {
		m, _ := ts.Index().Lookup(p.token.Current)
		return m.FirstFetchRecorded, "the index has not seen the annotation"
	})
	next := newToken(t)
	updateToken(t, e.Client, p, func(tok secrets.Token) secrets.Token { return tok.Rotate(next, time.Now()) })
	waitServes(t, ts, next, p.payload.Ignition)
	for range 10 {
		ts.get(t, next)
		ts.get(t, p.token.Previous)
	}
	var s corev1.Secret
	if err := e.Client.Get(context.Background(), p.tokenSecret, &s); err != nil {
		t.Fatal(err)
	}
	if got := s.Annotations[secrets.AnnotationFirstFetch]; got != recorded {
		t.Errorf("first fetch rewritten from %q to %q", recorded, got)
	}
	if got := patches.Load(); got != failures+1 {
		t.Errorf("%d patches, want %d failed and 1 that succeeded", got, failures)
	}
	if ok, failed := ts.metric(t, "nodepool_payload_server_first_fetch_records_total", "result", "recorded"),
		ts.metric(t, "nodepool_payload_server_first_fetch_records_total", "result", "failed"); ok != 1 || failed != failures {
		t.Errorf("first fetch records: %v recorded, %v failed", ok, failed)
	}
}

func TestServingCertificateIsReloadedWhenItsFilesChange(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 1<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)

	ca2, err := testpki.NewCA("rotated-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca2.WriteServingCert(ts.certDir); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca2.Pool()}, DisableKeepAlives: true, DisableCompression: true}}
		req, _ := http.NewRequest(http.MethodGet, ts.url+IgnitionPath, nil)
		req.Header.Set("Authorization", "Bearer "+p.token.Current)
		resp, err := c.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Equal(body, p.payload.Ignition), resp.Status
	})

	// The connection opened before the rotation was not dropped: the old
	// client (which trusts the old CA only) fetches on it again.
	reused := false
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	}), http.MethodGet, ts.url+IgnitionPath, nil)
	req.Header.Set("Authorization", "Bearer "+p.token.Current)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("the connection opened before the rotation: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, p.payload.Ignition) || !reused {
		t.Fatalf("on the connection opened before the rotation: status %d, reused %v", resp.StatusCode, reused)
	}
}

func TestInvalidSecretsAreNotServed(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	ctx := context.Background()

	// A payload Secret whose Ignition does not inflate: its token gets 503.
	p := testPayload(ns, "broken-payload", "v1", 1<<10)
	s, err := secrets.NewPayloadSecret(ns, "broken-payload-payload", p)
	if err != nil {
		t.Fatal(err)
	}
	s.Data[secrets.KeyIgnition] = []byte("not gzip")
	if err := e.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	brokenPayload := createTokenSecret(t, e.Client, ns, "broken-payload", "broken-payload-token", p.Hash, "")

	// A token Secret edited into an invalid state stops serving.
	good := createPool(t, e.Client, ns, "edited", 1<<10)
	waitServes(t, ts, good.token.Current, good.payload.Ignition)
	// The server may be annotating the Secret (first fetch): retry conflicts.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s corev1.Secret
		if err := e.Client.Get(ctx, good.tokenSecret, &s); err != nil {
			return err
		}
		s.Data[secrets.KeyPayloadHash] = []byte("not-a-hash")
		return e.Client.Update(ctx, &s)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ts, good.token.Current, http.StatusNetworkAuthenticationRequired)
	waitStatus(t, ts, brokenPayload.Current, http.StatusServiceUnavailable)
	eventually(t, 10*time.Second, func() (bool, string) {
		got := ts.metric(t, "nodepool_payload_server_invalid_secrets")
		return got == 2, fmt.Sprintf("invalid secrets = %v", got)
	})
}

func TestProbesAndMetrics(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 1<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	ts.get(t, "")
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/ignition": 404} {
		resp, err := http.Get(ts.probeURL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %s", path, resp.Status)
		}
		if path != "/metrics" {
			continue
		}
		for _, line := range []string{
			`nodepool_payload_server_requests_total{result="served"}`,
			`nodepool_payload_server_requests_total{result="no_token"} 1`,
			`nodepool_payload_server_request_duration_seconds_bucket{result="served",le="+Inf"}`,
			"nodepool_payload_server_tokens 1",
			"nodepool_payload_server_token_secrets 1",
			"nodepool_payload_server_payloads 1",
			"nodepool_payload_server_invalid_secrets 0",
		} {
			if !strings.Contains(string(body), line) {
				t.Errorf("/metrics lacks %s", line)
			}
		}
	}
	// The TLS listener serves /ignition only.
	if status, _, _, _ := ts.do(http.MethodGet, "/metrics", nil); status != http.StatusNotFound {
		t.Errorf("/metrics on the TLS listener: %d", status)
	}
}
