//go:build !fuzzonly

package payloadserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"nodepool.dev/nodepool/internal/secrets"
)

func TestTokenOfPoolANeverReceivesPoolBsPayload(t *testing.T) {
	e := testEnv(t)
	ns1, ns2 := e.NewNamespace(t), e.NewNamespace(t)
	ts := startServer(t, Options{})
	a := createPool(t, e.Client, ns1, "a", 4<<10)
	b := createPool(t, e.Client, ns1, "b", 4<<10)
	// The same pool name in another namespace is another pool.
	a2 := createPool(t, e.Client, ns2, "a", 4<<10)
	for _, p := range []*testPool{a, b, a2} {
		waitServes(t, ts, p.token.Current, p.payload.Ignition)
	}
	for range 3 {
		for _, p := range []*testPool{a, b, a2} {
			status, body := ts.get(t, p.token.Current)
			if status != http.StatusOK || !bytes.Equal(body, p.payload.Ignition) {
				t.Fatalf("the token of %s/%s got status %d and another payload", p.ns, p.name, status)
			}
		}
	}
}

func TestPreviousTokenWorksAfterRotationAndTheOneBeforeStops(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	first := p.token.Current
	waitServes(t, ts, first, p.payload.Ignition)

	second := newToken(t)
	updateToken(t, e.Client, p, func(tok secrets.Token) secrets.Token { return tok.Rotate(second, time.Now()) })
	waitServes(t, ts, second, p.payload.Ignition)
	if status, body := ts.get(t, first); status != http.StatusOK || !bytes.Equal(body, p.payload.Ignition) {
		t.Fatalf("the previous token got status %d after one rotation", status)
	}

	third := newToken(t)
	updateToken(t, e.Client, p, func(tok secrets.Token) secrets.Token { return tok.Rotate(third, time.Now()) })
	waitServes(t, ts, third, p.payload.Ignition)
	waitStatus(t, ts, first, http.StatusNetworkAuthenticationRequired)
	if status, _ := ts.get(t, second); status != http.StatusOK {
		t.Fatalf("the previous token got status %d after the second rotation", status)
	}
}

func TestRemovedTokenGets511WithinSeconds(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	if err := e.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metaOf(p.tokenSecret)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ts, p.token.Current, http.StatusNetworkAuthenticationRequired)
	if got := ts.metric(t, "nodepool_payload_server_tokens"); got != 0 {
		t.Errorf("tokens indexed = %v after the only token Secret was deleted", got)
	}
}

func TestTokenFollowsItsPayloadPointer(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 4<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	next := testPayload(ns, "workers", "v2", 4<<10)
	createPayload(t, e.Client, ns, next, p.uid)
	updateToken(t, e.Client, p, func(tok secrets.Token) secrets.Token { tok.PayloadHash = next.Hash; return tok })
	waitServes(t, ts, p.token.Current, next.Ignition)
}

func TestGzipIsServedAsStored(t *testing.T) {
	e := testEnv(t)
	ns := e.NewNamespace(t)
	ts := startServer(t, Options{Namespace: ns})
	p := createPool(t, e.Client, ns, "workers", 64<<10)
	waitServes(t, ts, p.token.Current, p.payload.Ignition)
	status, body, hdr, err := ts.do(http.MethodGet, IgnitionPath, http.Header{
		"Authorization":   {"Bearer " + p.token.Current},
		"Accept-Encoding": {"gzip"},
	})
	if err != nil || status != http.StatusOK {
		t.Fatalf("status %d, %v", status, err)
	}
	if hdr.Get("Content-Encoding") != "gzip" || hdr.Get("Content-Type") != ContentTypeIgnition || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", hdr)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(raw, p.payload.Ignition) {
		t.Fatalf("the gzip body does not inflate to the payload: %v", err)
	}
	if len(body) >= len(raw) {
		t.Errorf("gzip body of %d bytes for %d bytes of JSON", len(body), len(raw))
	}
}

func TestBadRequestsNeverGetThePayload(t *testing.T) {
	e := testEnv(t)
	ns1, ns2 := e.NewNamespace(t), e.NewNamespace(t)
	ts := startServer(t, Options{})
	a := createPool(t, e.Client, ns1, "a", 4<<10)
	// A token Secret in another namespace, same pool name, pointing to a's
	// payload hash: the payload is looked up in its own namespace only.
	otherNS := createTokenSecret(t, e.Client, ns2, "a", "a-token-other-namespace", a.payload.Hash, a.uid)
	// A token Secret of another pool in a's namespace pointing to a's
	// payload hash: the payload is looked up for its own pool only.
	otherPool := createTokenSecret(t, e.Client, ns1, "b", "b-token-points-at-a", a.payload.Hash, uuid.NewUUID())
	waitServes(t, ts, a.token.Current, a.payload.Ignition)
	eventually(t, 10*time.Second, func() (bool, string) {
		_, ok1 := ts.Index().Lookup(otherNS.Current)
		_, ok2 := ts.Index().Lookup(otherPool.Current)
		return ok1 && ok2, "the crafted token Secrets are not indexed yet"
	})
	tok := a.token.Current
	addr := ts.Addr().String()
	big := strings.Repeat("x", 1<<20)

	type outcome struct {
		status int
		body   []byte
		hdr    http.Header
		err    error
	}
	get := func(h http.Header) func() outcome {
		return func() outcome {
			s, b, hh, err := ts.do(http.MethodGet, IgnitionPath, h)
			return outcome{s, b, hh, err}
		}
	}
	raw := func(req string) func() outcome {
		return func() outcome {
			s, b, err := ts.raw(t, req)
			return outcome{status: s, body: b, err: err}
		}
	}
	rawAuth := func(value string) func() outcome {
		return raw("GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: " + value + "\r\nConnection: close\r\n\r\n")
	}
	withTLS := func(minV, maxV uint16) func() outcome {
		return func() outcome {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: minV, MaxVersion: maxV}}}
			req, _ := http.NewRequest(http.MethodGet, ts.url+IgnitionPath, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := c.Do(req)
			if err != nil {
				return outcome{err: err}
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return outcome{status: resp.StatusCode, body: b}
		}
	}
	method := func(m string) func() outcome {
		return func() outcome {
			s, b, hh, err := ts.do(m, IgnitionPath, http.Header{"Authorization": {"Bearer " + tok}})
			return outcome{s, b, hh, err}
		}
	}
	path := func(p string) func() outcome {
		return func() outcome {
			s, b, hh, err := ts.do(http.MethodGet, p, http.Header{"Authorization": {"Bearer " + tok}})
			return outcome{s, b, hh, err}
		}
	}
	const s511 = http.StatusNetworkAuthenticationRequired
	for _, tc := range []struct {
		name    string
		do      func() outcome
		status  int    // 0: the request must fail
		wantErr string // part of the failure
	}{
		{"no Authorization header", get(http.Header{}), s511, ""},
		{"Basic scheme with user:token", get(http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("core:"+tok))}}), s511, ""},
		{"Basic scheme with the token", get(http.Header{"Authorization": {"Basic " + tok}}), s511, ""},
		{"token without scheme", get(http.Header{"Authorization": {tok}}), s511, ""},
		{"scheme without token", get(http.Header{"Authorization": {"Bearer"}}), s511, ""},
		{"empty token", rawAuth("Bearer "), s511, ""},
		{"garbage", get(http.Header{"Authorization": {"Bearer %%%<script>../../etc/passwd"}}), s511, ""},
		{"well-formed unknown token", get(http.Header{"Authorization": {"Bearer " + newToken(t)}}), s511, ""},
		{"token with one more character", get(http.Header{"Authorization": {"Bearer " + tok + "A"}}), s511, ""},
		{"token without its last character", get(http.Header{"Authorization": {"Bearer " + tok[:len(tok)-1]}}), s511, ""},
		{"token followed by more text", rawAuth("Bearer " + tok + " extra"), s511, ""},
		{"tab between scheme and token", rawAuth("Bearer\t" + tok), s511, ""},
		{"scheme glued to token", rawAuth("Bearer" + tok), s511, ""},
		{"token in the query, not the header", func() outcome {
			s, b, hh, err := ts.do(http.MethodGet, IgnitionPath+"?token="+tok+"&access_token="+tok, http.Header{})
			return outcome{s, b, hh, err}
		}, s511, ""},
		{"two Authorization headers", get(http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}), s511, ""},
		{"token Secret of another namespace", get(http.Header{"Authorization": {"Bearer " + otherNS.Current}}), http.StatusServiceUnavailable, ""},
		{"token Secret of another pool", get(http.Header{"Authorization": {"Bearer " + otherPool.Current}}), http.StatusServiceUnavailable, ""},
		{"1 MiB header", get(http.Header{"Authorization": {"Bearer " + tok}, "X-Big": {big}}), http.StatusRequestHeaderFieldsTooLarge, ""},
		{"1 MiB Authorization header", rawAuth("Bearer " + big), http.StatusRequestHeaderFieldsTooLarge, ""},
		{"NUL in the header", rawAuth("Bearer " + tok + "\x00"), http.StatusBadRequest, ""},
		{"wrong path /", path("/"), http.StatusNotFound, ""},
		{"wrong path /ignition/", path("/ignition/"), http.StatusNotFound, ""},
		{"wrong path /IGNITION", path("/IGNITION"), http.StatusNotFound, ""},
		{"dot segments", raw("GET /x/../ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + "\r\nConnection: close\r\n\r\n"), http.StatusNotFound, ""},
		{"POST", method(http.MethodPost), http.StatusMethodNotAllowed, ""},
		{"PUT", method(http.MethodPut), http.StatusMethodNotAllowed, ""},
		{"HEAD", method(http.MethodHead), http.StatusMethodNotAllowed, ""},
		{"HTTP instead of HTTPS", func() outcome {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+IgnitionPath, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return outcome{err: err}
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return outcome{status: resp.StatusCode, body: b}
		}, http.StatusBadRequest, ""},
		{"TLS 1.1 client", withTLS(tls.VersionTLS10, tls.VersionTLS11), 0, "protocol version not supported"},
		{"TLS 1.0 client", withTLS(tls.VersionTLS10, tls.VersionTLS10), 0, "protocol version not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.do()
			if bytes.Contains(o.body, []byte(marker)) || bytes.Contains(o.body, a.payload.Ignition[:64]) {
				t.Fatalf("got payload bytes (status %d)", o.status)
			}
			if tc.status == 0 {
				if o.err == nil {
					t.Fatalf("want a failure, got status %d", o.status)
				}
				if !strings.Contains(o.err.Error(), tc.wantErr) {
					t.Fatalf("failure %q does not say %q", o.err, tc.wantErr)
				}
				return
			}
			if o.err != nil {
				t.Fatalf("want status %d, got %v", tc.status, o.err)
			}
			if o.status != tc.status {
				t.Fatalf("status %d, want %d (body %.100q)", o.status, tc.status, o.body)
			}
			if o.status == s511 && string(o.body) != bodyUnauthorized {
				t.Errorf("511 body %q, want the fixed one", o.body)
			}
			if o.status == http.StatusMethodNotAllowed && o.hdr.Get("Allow") != http.MethodGet {
				t.Errorf("405 with Allow %q", o.hdr.Get("Allow"))
			}
		})
	}
	if got := ts.metric(t, "nodepool_payload_server_requests_total", "result", "served"); got < 1 {
		t.Errorf("served = %v", got)
	}
}
