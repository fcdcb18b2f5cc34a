package devenv

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"nodepool.dev/nodepool/internal/pki"
)

func TestTheCAIsKeptAcrossRestartsAndSignsWhatItIssues(t *testing.T) {
	dir := t.TempDir()
	first, err := loadOrCreateCA(dir, "ca", "test CA")
	if err != nil {
		t.Fatal(err)
	}
	second, err := loadOrCreateCA(dir, "ca", "test CA")
	if err != nil {
		t.Fatal(err)
	}
	if string(first.pem) != string(second.pem) {
		t.Fatal("a second start made a new CA: user-data pinning the old one would break")
	}
	certPEM, _, err := second.issue(leaf{commonName: "server", hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first.pem)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Errorf("a serving certificate does not verify against the kept CA: %v", err)
	}
	client, _, err := second.issue(leaf{commonName: "admin", organizations: []string{"system:masters"}, client: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = pem.Decode(client)
	cert, _ = x509.ParseCertificate(b.Bytes)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a client certificate does not verify: %v", err)
	}
}

func TestAHalfWrittenCAIsRefusedWithAWayOut(t *testing.T) {
	dir := t.TempDir()
	if err := pki.WriteFileAtomic(dir+"/ca.crt", []byte("not a certificate")); err != nil {
		t.Fatal(err)
	}
	_, err := loadOrCreateCA(dir, "ca", "test CA")
	if err == nil {
		t.Fatal("a CA without its key was accepted")
	}
	t.Log(err)
}
