package userdata

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"

	v3_5 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/vcontext/report"
	"github.com/vincent-petithory/dataurl"
)

// HeaderAuthorization carries the machine's token: "Bearer <token>".
const HeaderAuthorization = "Authorization"

const bearerPrefix = "Bearer "

// maxCASize bounds a CA bundle inflated from a compressed data URL.
const maxCASize = 1 << 20

// Pointer is what a machine learns from its user-data: where its payload
// is, what to send with the request and which CAs to trust. Printing a
// Pointer never shows the token.
type Pointer struct {
	// URL is the payload's https URL.
	URL *url.URL
	// Headers are the HTTP headers to send, Authorization included.
	Headers http.Header
	// Token is the bearer token of the Authorization header.
	Token string
	// CAs are the certificates the payload server's certificate must chain
	// to; empty means the system roots.
	CAs []*x509.Certificate
	// Verification is the expected hash of the payload, "sha512-<hex>" or
	// "sha256-<hex>", or "" when the pointer does not pin one.
	Verification string
}

// String describes p without its token.
func (p *Pointer) String() string {
	if p == nil {
		return "<nil pointer config>"
	}
	return fmt.Sprintf("pointer config to %s (token redacted, %d CA certificate(s))", p.URL, len(p.CAs))
}

// GoString is String, so %#v does not print the token either.
func (p *Pointer) GoString() string { return p.String() }

// CertPool returns the pool to verify the payload server with: the
// pointer's CAs, or nil (the system roots) when it has none.
func (p *Pointer) CertPool() *x509.CertPool {
	if len(p.CAs) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	for _, c := range p.CAs {
		pool.AddCert(c)
	}
	return pool
}

// Verify checks a fetched payload against the pointer's verification
// hash, as Ignition does; it accepts anything when the pointer pins none.
func (p *Pointer) Verify(payload []byte) error {
	if p.Verification == "" {
		return nil
	}
	fn, want, err := parseVerification(p.Verification)
	if err != nil {
		return err
	}
	h := fn()
	h.Write(payload)
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the payload does not match the user-data's verification hash %s", p.Verification)
	}
	return nil
}

// Render returns the Ignition pointer config (spec 3.5.0, JSON) that makes a
// machine fetch its payload from sourceURL with "Authorization: Bearer
// <token>", trusting the PEM certificates of caPEM. The token appears in
// the result and nowhere else: callers store it in a Secret only.
func Render(sourceURL string, caPEM []byte, token string) ([]byte, error) {
	r, err := NewRenderer(sourceURL, caPEM)
	if err != nil {
		return nil, err
	}
	return r.Render(token)
}

// Renderer renders the pointer configs of one payload server URL and CA,
// checked once: a pointer config for each token is then a JSON encoding
// only (a controller renders one per pool and reconcile).
type Renderer struct {
	url, ca string
	// what it was made of, as given
	sourceURL string
	caPEM     []byte
}

// NewRenderer checks sourceURL and caPEM, and that a pointer config of
// theirs parses back exactly as a machine reads it.
func NewRenderer(sourceURL string, caPEM []byte) (*Renderer, error) {
	u, err := parsePayloadURL(sourceURL)
	if err != nil {
		return nil, err
	}
	if _, err := parseCertificates(caPEM); err != nil {
		return nil, fmt.Errorf("payload server CA: %w", err)
	}
	r := &Renderer{url: u.String(), ca: "data:;base64," + base64.StdEncoding.EncodeToString(caPEM), sourceURL: sourceURL, caPEM: bytes.Clone(caPEM)}
	b, err := r.encode("check")
	if err != nil {
		return nil, err
	}
	// Validate what is built exactly as a machine will read it: the token
	// is only ever a JSON string of token68 characters in the same place.
	if _, err := Parse(b); err != nil {
		return nil, fmt.Errorf("the rendered pointer config does not parse back, a bug in nodepool: %w", err)
	}
	return r, nil
}

// Is reports whether r renders for sourceURL and caPEM.
func (r *Renderer) Is(sourceURL string, caPEM []byte) bool {
	return r.sourceURL == sourceURL && bytes.Equal(r.caPEM, caPEM)
}

// Render returns the pointer config of token.
func (r *Renderer) Render(token string) ([]byte, error) {
	if err := validateToken(token); err != nil {
		return nil, err
	}
	return r.encode(token)
}

func (r *Renderer) encode(token string) ([]byte, error) {
	source, ca := r.url, r.ca
	auth := bearerPrefix + token
	cfg := igntypes.Config{Ignition: igntypes.Ignition{
		Version: igntypes.MaxVersion.String(),
		Config: igntypes.IgnitionConfig{Merge: []igntypes.Resource{{
			Source:      &source,
			HTTPHeaders: igntypes.HTTPHeaders{{Name: HeaderAuthorization, Value: &auth}},
		}}},
		Security: igntypes.Security{TLS: igntypes.TLS{
			CertificateAuthorities: []igntypes.Resource{{Source: &ca}},
		}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the pointer config: %w", err)
	}
	return b, nil
}

// Parse reads an Ignition pointer config (spec 3.0 to 3.5) the way a booting
// machine does: it validates the config with the Ignition library and
// returns the one source it points to (ignition.config.merge[0] or
// ignition.config.replace), its headers and token, and the CAs of
// ignition.security.tls. Errors say which part is wrong and never quote
// the token.
func Parse(userData []byte) (*Pointer, error) {
	if len(bytes.TrimSpace(userData)) == 0 {
		return nil, errors.New("the user-data is empty: the bootstrap data Secret's key \"value\" must hold an Ignition pointer config")
	}
	cfg, rpt, err := v3_5.ParseCompatibleVersion(userData)
	if err != nil {
		return nil, fmt.Errorf("the user-data is not a valid Ignition config (spec 3.0 to %s): %s", igntypes.MaxVersion, describe(rpt, err))
	}
	res, err := pointerSource(cfg.Ignition.Config)
	if err != nil {
		return nil, err
	}
	u, err := parsePayloadURL(*res.Source)
	if err != nil {
		return nil, fmt.Errorf("ignition.config source: %w", err)
	}
	p := &Pointer{URL: u, Headers: http.Header{}}
	for _, h := range res.HTTPHeaders {
		if h.Value != nil {
			p.Headers.Add(h.Name, *h.Value)
		}
	}
	auth := p.Headers.Get(HeaderAuthorization)
	if auth == "" {
		return nil, fmt.Errorf("the pointer config sends no %s header: the payload server only answers a request with \"%s: Bearer <token>\"", HeaderAuthorization, HeaderAuthorization)
	}
	if !strings.HasPrefix(auth, bearerPrefix) {
		return nil, fmt.Errorf("the %s header of the pointer config is not \"Bearer <token>\"", HeaderAuthorization)
	}
	p.Token = strings.TrimPrefix(auth, bearerPrefix)
	if err := validateToken(p.Token); err != nil {
		return nil, fmt.Errorf("the %s header of the pointer config: %w", HeaderAuthorization, err)
	}
	if res.Verification.Hash != nil {
		if _, _, err := parseVerification(*res.Verification.Hash); err != nil {
			return nil, err
		}
		p.Verification = *res.Verification.Hash
	}
	for i, ca := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		certs, err := decodeCA(ca)
		if err != nil {
			return nil, fmt.Errorf("ignition.security.tls.certificateAuthorities[%d]: %w", i, err)
		}
		p.CAs = append(p.CAs, certs...)
	}
	return p, nil
}

func pointerSource(c igntypes.IgnitionConfig) (igntypes.Resource, error) {
	hasReplace := c.Replace.Source != nil
	switch {
	case hasReplace && len(c.Merge) > 0:
		return igntypes.Resource{}, errors.New("the user-data sets both ignition.config.replace and ignition.config.merge: a pointer config names exactly one payload")
	case hasReplace:
		return c.Replace, nil
	case len(c.Merge) == 0:
		return igntypes.Resource{}, errors.New("the user-data is not a pointer config: ignition.config.merge is empty, so it names no payload to fetch")
	case len(c.Merge) > 1:
		return igntypes.Resource{}, fmt.Errorf("the user-data merges %d configs: a pointer config names exactly one payload (ignition.config.merge[0])", len(c.Merge))
	case c.Merge[0].Source == nil:
		return igntypes.Resource{}, errors.New("ignition.config.merge[0] has no source: set it to the payload server's URL")
	}
	return c.Merge[0], nil
}

func parsePayloadURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("the payload URL %q does not parse: %w", s, err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("the payload URL %q is not https: the payload server serves payloads over HTTPS only", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("the payload URL %q has no host", s)
	}
	if u.User != nil {
		return nil, fmt.Errorf("the payload URL %s carries credentials: the token belongs in the Authorization header", u.Redacted())
	}
	return u, nil
}

// validateToken accepts the token68 syntax of RFC 6750 (what a bearer token
// may contain) and nothing that could break an HTTP header.
func validateToken(t string) error {
	if t == "" {
		return errors.New("the bearer token is empty")
	}
	body := strings.TrimRight(t, "=")
	if body == "" {
		return errors.New("the bearer token is not in token68 syntax (RFC 6750)")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
		if !ok {
			return fmt.Errorf("the bearer token has a character not allowed in a token (RFC 6750 token68) at offset %d", i)
		}
	}
	return nil
}

func decodeCA(r igntypes.Resource) ([]*x509.Certificate, error) {
	if r.Source == nil {
		return nil, errors.New("no source")
	}
	if !strings.HasPrefix(*r.Source, "data:") {
		scheme, _, _ := strings.Cut(*r.Source, ":")
		return nil, fmt.Errorf("the CA is fetched from a %s URL; embed it as a data: URL so the machine needs nothing else to trust the payload server", scheme)
	}
	du, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		return nil, fmt.Errorf("not a valid data: URL: %w", err)
	}
	data := du.Data
	if r.Compression != nil && *r.Compression != "" {
		if *r.Compression != "gzip" {
			return nil, fmt.Errorf("compression %q is not supported (Ignition knows gzip only)", *r.Compression)
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("compression is gzip but the data is not: %w", err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, maxCASize+1)); err != nil {
			return nil, fmt.Errorf("corrupt gzip: %w", err)
		}
		if len(data) > maxCASize {
			return nil, fmt.Errorf("inflates to more than %d bytes", maxCASize)
		}
	}
	if r.Verification.Hash != nil {
		fn, want, err := parseVerification(*r.Verification.Hash)
		if err != nil {
			return nil, err
		}
		h := fn()
		h.Write(data)
		if hex.EncodeToString(h.Sum(nil)) != want {
			return nil, fmt.Errorf("the CA does not match its verification hash %s", *r.Verification.Hash)
		}
	}
	return parseCertificates(data)
}

// parseCertificates returns every certificate of a PEM bundle, failing
// when there is none or one does not parse.
func parseCertificates(pemData []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the PEM bundle does not parse: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found: want one or more \"-----BEGIN CERTIFICATE-----\" blocks")
	}
	return out, nil
}

func parseVerification(v string) (func() hash.Hash, string, error) {
	algo, sum, ok := strings.Cut(v, "-")
	var fn func() hash.Hash
	var size int
	switch algo {
	case "sha512":
		fn, size = sha512.New, sha512.Size
	case "sha256":
		fn, size = sha256.New, sha256.Size
	}
	if !ok || fn == nil {
		return nil, "", fmt.Errorf("verification hash %q is not \"sha512-<hex>\" or \"sha256-<hex>\"", v)
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != size {
		return nil, "", fmt.Errorf("verification hash %q does not hold a %s digest in hex", v, algo)
	}
	return fn, strings.ToLower(sum), nil
}

// describe turns an Ignition report into one line naming each fatal entry.
func describe(rpt report.Report, err error) string {
	var msgs []string
	for _, e := range rpt.Entries {
		if e.Kind.IsFatal() {
			msgs = append(msgs, fmt.Sprintf("%s: %s", e.Context, e.Message))
		}
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}
