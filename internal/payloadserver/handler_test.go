//go:build !fuzzonly

package payloadserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBearerToken(t *testing.T) {
	tok := strings.Repeat("a", 43)
	for _, tc := range []struct {
		values []string
		ok     bool
	}{
		{[]string{"Bearer " + tok}, true},
		{[]string{"bearer " + tok}, true},
		{[]string{"BeArEr " + tok}, true},
		{[]string{"Bearer   " + tok}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"Bearer"}, false},
		{[]string{"Bearer "}, false},
		{[]string{"Bearer" + tok}, false},
		{[]string{"Bearer\t" + tok}, false},
		{[]string{"Bearer " + tok + " "}, false},
		{[]string{"Bearer " + tok + "a"}, false},
		{[]string{"Bearer " + tok[1:]}, false},
		{[]string{"Bearer " + tok[1:] + "="}, false},
		{[]string{"Basic " + tok}, false},
		{[]string{"Bearers " + tok}, false},
		{[]string{"Bearer " + tok, "Bearer " + tok}, false},
		{[]string{"Bearer " + tok[:42] + "é"}, false},
	} {
		got, ok := BearerToken(http.Header{"Authorization": tc.values})
		if ok != tc.ok || (ok && got != tok) {
			t.Errorf("BearerToken(%q) = %q, %v", tc.values, got, ok)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"GZIP"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"deflate, gzip;q=1.0, *;q=0.5"}, true},
		{[]string{"br", "gzip"}, true},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip; q=0.000"}, false},
		{[]string{"gzip;q=0.001"}, true},
		{[]string{"gzip;q=nonsense"}, false},
		{[]string{"identity"}, false},
		{[]string{"*"}, true},
		{[]string{"*;q=0"}, false},
		{[]string{"gzip;q=0, *"}, false},
		{[]string{"br, deflate"}, false},
	} {
		if got := AcceptsGzip(http.Header{"Accept-Encoding": tc.values}); got != tc.want {
			t.Errorf("AcceptsGzip(%q) = %v", tc.values, got)
		}
	}
}

func TestHandlerAnswersFromTheIndex(t *testing.T) {
	ix, pools := memIndex(t)
	ready := false
	var fetched []TokenSecretRef
	m, err := NewMetrics(prometheus.NewRegistry(), ix)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(ix, HandlerOptions{
		Metrics:      m,
		Ready:        func() bool { return ready },
		OnFirstFetch: func(r TokenSecretRef) { fetched = append(fetched, r) },
	})
	get := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "https://x"+IgnitionPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(fuzzTokenA); rec.Code != http.StatusServiceUnavailable || rec.Body.String() != bodyNotReady {
		t.Fatalf("before the index is synced: %d %q", rec.Code, rec.Body)
	}
	ready = true
	for _, tok := range []string{fuzzTokenA, fuzzTokenB, fuzzTokenB2} {
		rec := get(tok)
		if rec.Code != http.StatusOK || rec.Body.String() != string(pools[tok].payload.Ignition) {
			t.Fatalf("valid token: %d", rec.Code)
		}
		if rec.Header().Get("Content-Type") != ContentTypeIgnition || rec.Header().Get("Content-Length") == "" {
			t.Fatalf("headers %v", rec.Header())
		}
	}
	if len(fetched) != 3 || fetched[0].Name != "a-token" || fetched[1].Name != "b-token" {
		t.Fatalf("first fetches reported: %+v", fetched)
	}
	if rec := get(fuzzTokenNoPay); rec.Code != http.StatusServiceUnavailable || rec.Body.String() != bodyUnavailable {
		t.Fatalf("token without payload: %d %q", rec.Code, rec.Body)
	}
	for _, tok := range []string{fuzzTokenRemoved, "", "x"} {
		if rec := get(tok); rec.Code != http.StatusNetworkAuthenticationRequired || rec.Body.String() != bodyUnauthorized {
			t.Fatalf("token %q: %d %q", tok, rec.Code, rec.Body)
		}
	}
}

func TestProbeHandler(t *testing.T) {
	ready := false
	h := ProbeHandler(func() bool { return ready }, prometheus.NewRegistry())
	code := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code("/healthz") != 200 || code("/readyz") != 503 {
		t.Fatal("before sync: want healthy and not ready")
	}
	ready = true
	if code("/readyz") != 200 || code("/metrics") != 200 || code("/ignition") != 404 {
		t.Fatal("after sync")
	}
}
