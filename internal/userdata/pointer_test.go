package userdata

import (
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

const (
	testURL   = "https://payload.nodepool-system.svc:8443/ignition"
	testToken = "dGhpcy1pcy1hLXRlc3QtdG9rZW4tb2YtNDMtY2hhcnM"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "userdata test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestRender(t *testing.T) {
	ca := testCA(t)
	tests := []struct {
		name    string
		url     string
		ca      []byte
		token   string
		wantErr string
	}{
		{name: "valid", url: testURL, ca: ca, token: testToken},
		{name: "token68 with padding", url: testURL, ca: ca, token: "abc.DEF~+/=="},
		{name: "http URL", url: "http://payload.example/ignition", ca: ca, token: testToken, wantErr: "is not https"},
		{name: "no host", url: "https:///ignition", ca: ca, token: testToken, wantErr: "has no host"},
		{name: "credentials in URL", url: "https://u:p@payload.example/ignition", ca: ca, token: testToken, wantErr: "carries credentials"},
		{name: "no CA", url: testURL, ca: nil, token: testToken, wantErr: "no PEM certificate"},
		{name: "CA is not PEM", url: testURL, ca: []byte("not a certificate"), token: testToken, wantErr: "no PEM certificate"},
		{name: "empty token", url: testURL, ca: ca, token: "", wantErr: "token is empty"},
		{name: "token with a newline", url: testURL, ca: ca, token: "abc\nX-Evil: 1", wantErr: "not allowed in a token"},
		{name: "token with a space", url: testURL, ca: ca, token: "abc def", wantErr: "not allowed in a token"},
		{name: "token of padding only", url: testURL, ca: ca, token: "==", wantErr: "token68"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Render(tt.url, tt.ca, tt.token)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Render: got error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), tt.token) && tt.token != "" {
					t.Fatalf("error quotes the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse(Render(...)): %v", err)
			}
			if p.URL.String() != tt.url || p.Token != tt.token || p.Headers.Get(HeaderAuthorization) != "Bearer "+tt.token {
				t.Fatalf("round trip: got URL %s, token %q, headers %v", p.URL, p.Token, p.Headers)
			}
			if len(p.CAs) != 1 || !bytes.Equal(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.CAs[0].Raw}), tt.ca) || p.CertPool() == nil {
				t.Fatalf("round trip lost the CA: %d CAs", len(p.CAs))
			}
		})
	}
}

// TestRenderShape pins where the pointer config puts each part, as the
// design says: merge[0] with the Authorization header, the CA as a data URL.
func TestRenderShape(t *testing.T) {
	ca := testCA(t)
	b, err := Render(testURL, ca, testToken)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Ignition struct {
			Version string
			Config  struct {
				Merge []struct {
					Source      string
					HTTPHeaders []struct{ Name, Value string }
				}
			}
			Security struct {
				TLS struct {
					CertificateAuthorities []struct{ Source string }
				}
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ign := got.Ignition
	if ign.Version != "3.5.0" || len(ign.Config.Merge) != 1 || ign.Config.Merge[0].Source != testURL {
		t.Fatalf("unexpected pointer config: %s", b)
	}
	if h := ign.Config.Merge[0].HTTPHeaders; len(h) != 1 || h[0].Name != "Authorization" || h[0].Value != "Bearer "+testToken {
		t.Fatalf("unexpected headers: %+v", h)
	}
	cas := ign.Security.TLS.CertificateAuthorities
	if len(cas) != 1 || cas[0].Source != "data:;base64,"+base64.StdEncoding.EncodeToString(ca) {
		t.Fatalf("unexpected CAs: %+v", cas)
	}
}

func TestParse(t *testing.T) {
	ca := testCA(t)
	caURL := "data:;base64," + base64.StdEncoding.EncodeToString(ca)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(ca)
	_ = zw.Close()
	gzURL := "data:;base64," + base64.StdEncoding.EncodeToString(gz.Bytes())
	sum := sha512.Sum512([]byte("payload"))
	verification := "sha512-" + hex.EncodeToString(sum[:])

	auth := `"httpHeaders":[{"name":"Authorization","value":"Bearer ` + testToken + `"}]`
	merge := func(source string) string {
		return fmt.Sprintf(`"config":{"merge":[{"source":%q,%s}]}`, source, auth)
	}
	tls := func(source string) string {
		return fmt.Sprintf(`"security":{"tls":{"certificateAuthorities":[{"source":%q}]}}`, source)
	}
	cfg := func(version string, parts ...string) string {
		return fmt.Sprintf(`{"ignition":{"version":%q,%s}}`, version, strings.Join(parts, ","))
	}

	tests := []struct {
		name      string
		userData  string
		wantErr   string
		wantCAs   int
		wantCheck func(*Pointer) error
	}{
		{name: "3.5 merge", userData: cfg("3.5.0", merge(testURL), tls(caURL)), wantCAs: 1},
		{name: "3.2 merge (older spec)", userData: cfg("3.2.0", merge(testURL), tls(caURL)), wantCAs: 1},
		{name: "no CA uses system roots", userData: cfg("3.5.0", merge(testURL)), wantCAs: 0},
		{name: "gzip CA", userData: cfg("3.5.0", merge(testURL), `"security":{"tls":{"certificateAuthorities":[{"source":"`+gzURL+`","compression":"gzip"}]}}`), wantCAs: 1},
		{name: "replace", userData: cfg("3.5.0", `"config":{"replace":{"source":"`+testURL+`",`+auth+`}}`), wantCAs: 0},
		{name: "extra header kept", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`","httpHeaders":[{"name":"Authorization","value":"Bearer `+testToken+`"},{"name":"X-Machine","value":"m1"}]}]}`),
			wantCheck: func(p *Pointer) error {
				if p.Headers.Get("X-Machine") != "m1" {
					return fmt.Errorf("lost header X-Machine: %v", p.Headers)
				}
				return nil
			}},
		{name: "verification pinned", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`",`+auth+`,"verification":{"hash":"`+verification+`"}}]}`),
			wantCheck: func(p *Pointer) error {
				if err := p.Verify([]byte("payload")); err != nil {
					return err
				}
				if p.Verify([]byte("other")) == nil {
					return fmt.Errorf("a payload with another hash verified")
				}
				return nil
			}},
		{name: "empty", userData: "  ", wantErr: "the user-data is empty"},
		{name: "not JSON", userData: "#cloud-config\nruncmd: []", wantErr: "not a valid Ignition config"},
		{name: "spec 2", userData: `{"ignition":{"version":"2.2.0"}}`, wantErr: "not a valid Ignition config"},
		{name: "misspelt config (a warning for Ignition)", userData: `{"ignition":{"version":"3.5.0","cnfig":{}}}`, wantErr: "ignition.config.merge is empty"},
		{name: "no merge", userData: cfg("3.5.0", tls(caURL)), wantErr: "ignition.config.merge is empty"},
		{name: "two merges", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`"},{"source":"`+testURL+`2"}]}`), wantErr: "merges 2 configs"},
		{name: "merge and replace", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`"}],"replace":{"source":"`+testURL+`"}}`), wantErr: "both ignition.config.replace and ignition.config.merge"},
		{name: "http source", userData: cfg("3.5.0", merge("http://payload.example/ignition")), wantErr: "is not https"},
		{name: "no Authorization", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`"}]}`), wantErr: "sends no Authorization header"},
		{name: "basic auth", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`","httpHeaders":[{"name":"Authorization","value":"Basic dXNlcjpwYXNz"}]}]}`), wantErr: "is not \"Bearer <token>\""},
		{name: "CA over https", userData: cfg("3.5.0", merge(testURL), tls("https://ca.example/ca.pem")), wantErr: "certificateAuthorities[0]: the CA is fetched from a https URL"},
		{name: "CA not a certificate", userData: cfg("3.5.0", merge(testURL), tls("data:,hello")), wantErr: "certificateAuthorities[0]: no PEM certificate"},
		{name: "bad verification", userData: cfg("3.5.0", `"config":{"merge":[{"source":"`+testURL+`",`+auth+`,"verification":{"hash":"md5-00"}}]}`), wantErr: "not a valid Ignition config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.userData))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse: got error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testToken) {
					t.Fatalf("error quotes the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.URL.String() != testURL || p.Token != testToken {
				t.Fatalf("got URL %s token %q", p.URL, p.Token)
			}
			if len(p.CAs) != tt.wantCAs {
				t.Fatalf("got %d CAs, want %d", len(p.CAs), tt.wantCAs)
			}
			if tt.wantCheck != nil {
				if err := tt.wantCheck(p); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestPointerNeverPrintsToken(t *testing.T) {
	b, err := Render(testURL, testCA(t), testToken)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%v", p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p), fmt.Sprintf("%s", p)} {
		if strings.Contains(s, testToken) {
			t.Fatalf("printing a Pointer shows the token: %s", s)
		}
	}
}

// A Renderer checks the URL and CA once; every pointer config it renders
// still parses back, as a machine reads it, to its own token.
func TestARendererRendersWhatRenderDoes(t *testing.T) {
	ca := testCA(t)
	r, err := NewRenderer(testURL, ca)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Is(testURL, ca) || r.Is(testURL+"x", ca) || r.Is(testURL, append([]byte("\n"), ca...)) {
		t.Fatal("Is does not tell the renderer's URL and CA from others")
	}
	for _, tok := range []string{testToken, "abc", "a-b.c_d~e+f/g==", strings.Repeat("z", 512)} {
		got, err := r.Render(tok)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Render(testURL, ca, tok)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("token %q: the renderer gives %s, Render %s", tok, got, want)
		}
		p, err := Parse(got)
		if err != nil || p.Token != tok {
			t.Fatalf("token %q: parses back as %v, %v", tok, p, err)
		}
	}
	for _, bad := range []string{"", "a b", `a"b`, "==", "tok\n"} {
		if _, err := r.Render(bad); err == nil {
			t.Errorf("token %q rendered", bad)
		}
	}
	if _, err := NewRenderer("http://payload.example/ignition", ca); err == nil {
		t.Error("a plain-HTTP URL was accepted")
	}
	if _, err := NewRenderer(testURL, []byte("not a PEM")); err == nil {
		t.Error("a CA that is no PEM was accepted")
	}
}
