// Package testpki makes throwaway certificate authorities and serving
// certificates for tests and benchmarks of HTTPS servers on loopback. Never
// for production: keys are generated in process and written in the clear.
package testpki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"time"

	"nodepool.dev/nodepool/internal/pki"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, as clients trust it.
	PEM []byte
}

// NewCA returns a CA valid for a day.
func NewCA(name string) (*CA, error) {
	der, key, err := pki.NewCA(name, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a certificate pool trusting only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue returns a serving certificate and its key, PEM-encoded, for hosts
// (DNS names or IP addresses); none means localhost and 127.0.0.1.
func (ca *CA) Issue(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	certPEM, key, err := pki.Sign(ca.Cert, ca.key, pki.Leaf{CommonName: hosts[0], Hosts: hosts, Validity: 24 * time.Hour})
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// IssueTLS is Issue as a tls.Certificate.
func (ca *CA) IssueTLS(hosts ...string) (tls.Certificate, error) {
	c, k, err := ca.Issue(hosts...)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

// WriteServingCert issues a certificate for hosts and writes it and its key
// to dir as tls.crt and tls.key (the layout of a kubernetes.io/tls Secret
// mount). Writes replace the files atomically, so a watcher never reads half
// a certificate.
func (ca *CA) WriteServingCert(dir string, hosts ...string) (certFile, keyFile string, err error) {
	c, k, err := ca.Issue(hosts...)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := pki.WriteFileAtomic(keyFile, k); err != nil {
		return "", "", err
	}
	if err := pki.WriteFileAtomic(certFile, c); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
