package payloadserver

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler feeds arbitrary requests (raw HTTP/1.1 bytes, parsed as the
// server parses them) to the handler over an in-memory index and checks
// that it never panics, never returns a payload without a valid token,
// never returns another pool's payload, and always serves a valid one.
// Seeds: testdata/fuzz/FuzzHandler and the f.Add calls below.
func FuzzHandler(f *testing.F) {
	for _, seed := range []string{
		"GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + fuzzTokenA + "\r\n\r\n",
		"GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: bearer   " + fuzzTokenB + "\r\nAccept-Encoding: gzip\r\n\r\n",
		"GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + fuzzTokenRemoved + "\r\n\r\n",
		"GET /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + fuzzTokenNoPay + "\r\n\r\n",
		"POST /ignition HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + fuzzTokenA + "\r\nContent-Length: 2\r\n\r\n{}",
		"GET /ignition?x HTTP/1.0\r\nAuthorization: Basic " + fuzzTokenA + "\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	ix, pools := memIndex(f)
	h := NewHandler(ix, HandlerOptions{OnFirstFetch: func(TokenSecretRef) {}})
	fixed := map[string]bool{bodyUnauthorized: true, bodyNotFound: true, bodyMethodNotAllowed: true, bodyUnavailable: true}

	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		body := rec.Body.Bytes()
		if rec.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("gzip body does not inflate: %v", err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatalf("gzip body does not inflate: %v", err)
			}
		}
		want, valid := validRequest(req, pools)
		switch {
		case rec.Code == http.StatusOK && !valid:
			t.Fatalf("200 without a valid token for %q", raw)
		case rec.Code == http.StatusOK && !bytes.Equal(body, want):
			t.Fatalf("200 with bytes other than the token's own payload for %q", raw)
		case rec.Code != http.StatusOK && valid:
			t.Fatalf("a valid request got %d: %q", rec.Code, raw)
		case rec.Code != http.StatusOK && !fixed[string(body)]:
			t.Fatalf("status %d with a body that is not a fixed one: %q", rec.Code, body)
		case bytes.Contains(body, []byte(marker)) && rec.Code != http.StatusOK:
			t.Fatalf("payload bytes with status %d", rec.Code)
		}
	})
}

// validRequest is the oracle, written independently of BearerToken: a GET
// of /ignition with one Authorization header equal to "Bearer", in any case,
// one or more spaces, and a token of a pool with a payload.
func validRequest(req *http.Request, pools map[string]memPool) ([]byte, bool) {
	if req.Method != http.MethodGet || req.URL.Path != IgnitionPath {
		return nil, false
	}
	vs := req.Header.Values("Authorization")
	if len(vs) != 1 {
		return nil, false
	}
	for tok, p := range pools {
		v := vs[0]
		rest, ok := strings.CutSuffix(v, " "+tok)
		if !ok {
			continue
		}
		if strings.EqualFold(strings.TrimRight(rest, " "), "bearer") {
			return p.payload.Ignition, true
		}
	}
	return nil, false
}
