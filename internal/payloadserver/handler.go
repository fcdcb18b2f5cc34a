package payloadserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"nodepool.dev/nodepool/internal/secrets"
)

// IgnitionPath is the one path the TLS listener serves.
const IgnitionPath = "/ignition"

// ContentTypeIgnition is the media type of an Ignition config.
const ContentTypeIgnition = "application/vnd.coreos.ignition+json"

// Fixed bodies. The 511 body is the same for a missing, malformed, unknown,
// removed or ambiguous token, so an answer never says which it was, nor
// whether some pool exists.
const (
	bodyUnauthorized     = "network authentication required\n"
	bodyNotFound         = "404 page not found\n"
	bodyMethodNotAllowed = "method not allowed\n"
	bodyNotReady         = "payload server starting\n"
	bodyUnavailable      = "payload not available yet\n"
)

// Header values, allocated once: header maps are assigned directly, without
// canonicalising keys on every request.
var (
	hvIgnition = []string{ContentTypeIgnition}
	hvText     = []string{"text/plain; charset=utf-8"}
	hvNoStore  = []string{"no-store"}
	hvNoSniff  = []string{"nosniff"}
	hvGzip     = []string{"gzip"}
	hvVary     = []string{"Accept-Encoding"}
	hvAllow    = []string{http.MethodGet}
	hvRetry    = []string{"5"}
)

// HandlerOptions are the collaborators of a Handler; each may be nil.
type HandlerOptions struct {
	// Metrics records every request.
	Metrics *Metrics
	// Ready gates /ignition: until it returns true (the index holds every
	// Secret), requests get 503, since a 511 could be wrong. Nil: ready.
	Ready func() bool
	// OnFirstFetch is called, off the response, after a successful fetch with
	// a token whose Secret records no first fetch yet. It must return fast.
	OnFirstFetch func(TokenSecretRef)
	// Failures slows down sources of failed token attempts; a request with
	// a valid token never reaches it. Nil: no limit.
	Failures *FailureLimiter
}

// Handler answers GET /ignition from an Index. It never calls the API server
// and never renders: a request costs a header parse, a map lookup, a
// constant-time compare and a write of bytes held in memory.
type Handler struct {
	index *Index
	opts  HandlerOptions
}

// NewHandler returns the handler of the TLS listener.
func NewHandler(index *Index, opts HandlerOptions) *Handler {
	return &Handler{index: index, opts: opts}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	res := h.serve(w, r)
	if h.opts.Metrics != nil {
		h.opts.Metrics.observe(res, time.Since(start))
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) result {
	if r.URL == nil || r.URL.Path != IgnitionPath {
		writeText(w, http.StatusNotFound, bodyNotFound)
		return resultNotFound
	}
	if r.Method != http.MethodGet {
		w.Header()["Allow"] = hvAllow
		writeText(w, http.StatusMethodNotAllowed, bodyMethodNotAllowed)
		return resultMethodNotAllowed
	}
	if h.opts.Ready != nil && !h.opts.Ready() {
		w.Header()["Retry-After"] = hvRetry
		writeText(w, http.StatusServiceUnavailable, bodyNotReady)
		return resultNotReady
	}
	token, ok := BearerToken(r.Header)
	if !ok {
		h.unauthorized(w, r)
		return resultNoToken
	}
	m, ok := h.index.Lookup(token)
	if !ok {
		h.unauthorized(w, r)
		return resultUnknownToken
	}
	if m.Payload == nil {
		// Only a holder of a valid token gets here: it learns that its own
		// payload is not served yet, nothing about other pools.
		w.Header()["Retry-After"] = hvRetry
		writeText(w, http.StatusServiceUnavailable, bodyUnavailable)
		return resultPayloadUnavailable
	}
	hdr := w.Header()
	hdr["Content-Type"] = hvIgnition
	hdr["Cache-Control"] = hvNoStore
	hdr["X-Content-Type-Options"] = hvNoSniff
	hdr["Vary"] = hvVary
	body := m.Payload.JSON
	if AcceptsGzip(r.Header) {
		hdr["Content-Encoding"] = hvGzip
		body = m.Payload.Gzip
	}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // a client that went away is not an error of ours
	if !m.FirstFetchRecorded && h.opts.OnFirstFetch != nil {
		h.opts.OnFirstFetch(m.Secret)
	}
	return resultServed
}

// unauthorized answers a request without a valid token: the same 511 and
// body whatever was wrong, after the delay the failure limiter imposes on
// its source.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request) {
	if h.opts.Failures != nil && h.opts.Failures.Failed(r) {
		h.opts.Metrics.delayedFailure()
	}
	writeText(w, http.StatusNetworkAuthenticationRequired, bodyUnauthorized)
}

func writeText(w http.ResponseWriter, status int, body string) {
	hdr := w.Header()
	hdr["Content-Type"] = hvText
	hdr["Cache-Control"] = hvNoStore
	hdr["X-Content-Type-Options"] = hvNoSniff
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// BearerToken returns the token of the request's one Authorization header,
// "Bearer <token>" (RFC 6750 §2.1). The scheme is matched without regard to
// case, as RFC 9110 §11.1 requires of authentication schemes ("bearer" and
// "BEARER" work), and one or more spaces may separate it from the token.
// Leading and trailing whitespace is not part of a header's value (RFC 9110
// §5.5): HTTP parsing strips it before we see it. The token itself must
// have the exact form of secrets.GenerateToken; anything else, a second
// Authorization header included, is no token.
func BearerToken(h map[string][]string) (string, bool) {
	vs := h["Authorization"]
	if len(vs) != 1 {
		return "", false
	}
	v := vs[0]
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || v[len(scheme)] != ' ' {
		return "", false
	}
	tok := strings.TrimLeft(v[len(scheme):], " ")
	if !secrets.ValidToken(tok) {
		return "", false
	}
	return tok, true
}

// AcceptsGzip says whether the request's Accept-Encoding allows gzip
// (RFC 9110 §12.5.3): "gzip" or "x-gzip", or "*" when gzip is not named,
// with a q-value above 0. Ignition's Go HTTP client sends "gzip" and
// inflates transparently, so it receives the payload as stored.
func AcceptsGzip(h map[string][]string) bool {
	star := false
	for _, v := range h["Accept-Encoding"] {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			ok := qPositive(params)
			switch {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				return ok
			case coding == "*":
				star = ok
			}
		}
	}
	return star
}

// qPositive reads the q parameter of an Accept-Encoding element: absent is
// 1, and any value other than a form of 0 is positive.
func qPositive(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err == nil && q > 0
	}
	return true
}
