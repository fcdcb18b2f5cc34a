package sim

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodepool.dev/nodepool/internal/payloadserver/testpki"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/userdata"
)

const testToken = "dGhpcy1pcy1hLXRlc3QtdG9rZW4tb2YtNDMtY2hhcnM"

// tlsServer serves h over HTTPS with a certificate of a new CA, and returns
// a pointer to path on it, trusting that CA.
func tlsServer(t *testing.T, path string, h http.HandlerFunc) *userdata.Pointer {
	t.Helper()
	ca, err := testpki.NewCA("fetch test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	raw, err := userdata.Render(srv.URL+path, ca.PEM, testToken)
	if err != nil {
		t.Fatal(err)
	}
	p, err := userdata.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFetch(t *testing.T) {
	const payload = `{"ignition":{"version":"3.5.0"}}`
	f := newFetcher(5*time.Second, nil)
	ctx := context.Background()

	t.Run("sends the token, accepts gzip", func(t *testing.T) {
		p := tlsServer(t, "/ignition", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testToken || !strings.HasPrefix(r.UserAgent(), "Ignition/") {
				w.WriteHeader(http.StatusNetworkAuthenticationRequired)
				return
			}
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				_, _ = zw.Write([]byte(payload))
				_ = zw.Close()
				return
			}
			_, _ = w.Write([]byte(payload))
		})
		body, err := f.fetch(ctx, p)
		if err != nil || string(body) != payload {
			t.Fatalf("fetch = %q, %v", body, err)
		}
	})

	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	for _, tt := range []struct {
		code    int
		retried bool
	}{{511, true}, {503, true}, {500, true}, {404, false}, {403, false}, {302, false}} {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			p := tlsServer(t, "/ignition", func(w http.ResponseWriter, r *http.Request) {
				if tt.code == 302 {
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
					return
				}
				status(tt.code)(w, r)
			})
			_, err := f.fetch(ctx, p)
			var he *HTTPError
			if !errors.As(err, &he) || he.StatusCode != tt.code || he.Retried() != tt.retried {
				t.Fatalf("fetch error %v, want an HTTPError %d (retried %v)", err, tt.code, tt.retried)
			}
			if !strings.Contains(he.Error(), p.URL.String()) || strings.Contains(he.Error(), testToken) {
				t.Fatalf("error %q must name the URL and not the token", he)
			}
		})
	}

	t.Run("a server the CA did not sign is not trusted", func(t *testing.T) {
		p := tlsServer(t, "/ignition", status(200))
		other := tlsServer(t, "/ignition", status(200))
		p.CAs = other.CAs
		_, err := f.fetch(ctx, p)
		var he *HTTPError
		if err == nil || errors.As(err, &he) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("fetch error %v, want a TLS verification error", err)
		}
	})

	t.Run("no server", func(t *testing.T) {
		p := tlsServer(t, "/ignition", status(200))
		p.URL = &url.URL{Scheme: "https", Host: "127.0.0.1:1", Path: "/ignition"}
		if _, err := f.fetch(ctx, p); err == nil {
			t.Fatal("fetch from a closed port succeeded")
		}
	})
}

func TestFetchFailedFollowsIgnition(t *testing.T) {
	r := &machineReconciler{backoff: newBackoff(DefaultInitialRetryDelay, DefaultMaxRetryDelay)}
	sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	ctx := context.Background()
	tests := []struct {
		err        error
		reason     string
		retried    bool
		wantInText string
	}{
		{err: &HTTPError{URL: "https://p/ignition", StatusCode: 511, Status: "511 Network Authentication Required"}, reason: simv1.ReasonPayloadServerRefused, retried: true, wantInText: "does not know the user-data's token"},
		{err: &HTTPError{URL: "https://p/ignition", StatusCode: 503, Status: "503 Service Unavailable"}, reason: simv1.ReasonPayloadServerRefused, retried: true, wantInText: "retrying"},
		{err: &HTTPError{URL: "https://p/ignition", StatusCode: 404, Status: "404 Not Found"}, reason: simv1.ReasonPayloadServerRefused, wantInText: "does not retry"},
		{err: errors.New("dial tcp: connection refused"), reason: simv1.ReasonPayloadServerUnreachable, retried: true, wantInText: "connection refused"},
		{err: errPayloadTooLarge, reason: simv1.ReasonInvalidPayload},
	}
	for _, tt := range tests {
		step := r.fetchFailed(ctx, sm, tt.err)
		if step.reason != tt.reason || (step.retryAfter > 0) != tt.retried || !strings.Contains(step.message, tt.wantInText) {
			t.Errorf("%v: got %+v, want reason %s retried %v mentioning %q", tt.err, step, tt.reason, tt.retried, tt.wantInText)
		}
	}
}
