package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: Serial(), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func TestSignIssuesServingAndClientCertificatesTheCAVerifies(t *testing.T) {
	ca, caKey := testCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, tc := range []struct {
		leaf  Leaf
		usage x509.ExtKeyUsage
		host  string
	}{
		{leaf: Leaf{CommonName: "localhost", Hosts: []string{"localhost", "127.0.0.1"}, Validity: time.Hour}, usage: x509.ExtKeyUsageServerAuth, host: "127.0.0.1"},
		{leaf: Leaf{CommonName: "admin", Organizations: []string{"system:masters"}, Client: true, Validity: time.Hour}, usage: x509.ExtKeyUsageClientAuth},
	} {
		certPEM, key, err := Sign(ca, caKey, tc.leaf)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s: %v", tc.leaf.CommonName, err)
		}
		if !key.PublicKey.Equal(cert.PublicKey) || cert.Subject.CommonName != tc.leaf.CommonName {
			t.Errorf("%s: the certificate does not carry the key or the name", tc.leaf.CommonName)
		}
	}
}

func TestWriteFileAtomicReplacesTheFileForTheOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tls.key")
	for _, content := range []string{"first", "second"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
