package sim

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"nodepool.dev/nodepool/internal/userdata"
)

// DefaultFetchTimeout bounds one payload request, connection included.
const DefaultFetchTimeout = 10 * time.Second

// maxPayloadSize bounds a fetched payload: far above any worker's Ignition
// config, so a larger answer is refused instead of read.
const maxPayloadSize = 32 << 20

// userAgent tells the payload server who fetches (Ignition sends
// "Ignition/<version>").
const userAgent = "Ignition/2.24.0 (nodepool-sim)"

// HTTPError is an answer of the payload server other than 200 OK.
type HTTPError struct {
	// URL is the payload URL (it carries no credentials).
	URL string
	// StatusCode and Status are the HTTP status, e.g. 511 and
	// "511 Network Authentication Required".
	StatusCode int
	Status     string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("GET %s answered %s", e.URL, e.Status)
}

// Retried says whether Ignition tries again after this answer: it does on
// every 5xx (511 is how the payload server says it does not know the token).
func (e *HTTPError) Retried() bool { return e.StatusCode >= 500 }

// errPayloadTooLarge is returned for an answer above maxPayloadSize.
var errPayloadTooLarge = fmt.Errorf("the payload is larger than %d bytes", maxPayloadSize)

// fetcher fetches payloads the way Ignition does: GET with the pointer's
// headers, trusting the pointer's CAs, gzip accepted. One HTTP client per
// set of CAs keeps connections to the payload server alive.
type fetcher struct {
	timeout time.Duration
	dial    func(ctx context.Context, network, address string) (net.Conn, error)

	mu      sync.Mutex
	clients map[string]*http.Client
}

func newFetcher(timeout time.Duration, dial func(ctx context.Context, network, address string) (net.Conn, error)) *fetcher {
	if dial == nil {
		dial = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return &fetcher{timeout: timeout, dial: dial, clients: map[string]*http.Client{}}
}

// fetch returns the payload p points to. A non-200 answer is an *HTTPError;
// any other error means no answer (connection, TLS, timeout).
func (f *fetcher) fetch(ctx context.Context, p *userdata.Pointer) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the request to %s: %w", p.URL, err)
	}
	req.Header.Set("User-Agent", userAgent)
	for k, vs := range p.Headers {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := f.client(p).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, &HTTPError{URL: p.URL.String(), StatusCode: resp.StatusCode, Status: resp.Status}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPayloadSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the payload from %s: %w", p.URL, err)
	}
	if len(body) > maxPayloadSize {
		return nil, errPayloadTooLarge
	}
	return body, nil
}

func (f *fetcher) client(p *userdata.Pointer) *http.Client {
	h := sha256.New()
	for _, c := range p.CAs {
		h.Write(c.Raw)
	}
	key := hex.EncodeToString(h.Sum(nil))
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clients[key]; ok {
		return c
	}
	c := &http.Client{
		Timeout: f.timeout,
		Transport: &http.Transport{
			// A machine in the initramfs talks to the payload server directly.
			Proxy:               nil,
			DialContext:         f.dial,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.CertPool()},
			TLSHandshakeTimeout: f.timeout,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		},
		// The payload URL is the whole story: a redirect is an answer to
		// report, not to follow with the token.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	f.clients[key] = c
	return c
}

// describeFetchError turns a failed fetch into a sentence for a condition.
func describeFetchError(err error) string {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Error()
	}
	return err.Error()
}
