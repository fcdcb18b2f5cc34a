package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"nodepool.dev/nodepool/internal/pki"
)

// Validity of what the dev environment generates. Authorities and the
// service-account key are kept in <data-dir>/pki, so kubeconfigs, tokens and
// the payload server CA pinned in user-data stay valid across restarts;
// leaf certificates are issued afresh at every start.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
)

// authority is a certificate authority whose key lives in the data dir.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// pem is the CA certificate, as clients trust it.
	pem []byte
}

// loadOrCreateCA reads the CA <dir>/<name>.crt and .key, or creates them.
func loadOrCreateCA(dir, name, commonName string) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	if certErr == nil && keyErr == nil {
		ca, err := parseAuthority(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("reading the CA %s: %w; delete %s to start the dev environment afresh", certPath, err, filepath.Dir(dir))
		}
		if time.Now().After(ca.cert.NotAfter) {
			return nil, fmt.Errorf("the CA %s expired on %s; delete %s to start the dev environment afresh", certPath, ca.cert.NotAfter.Format(time.DateOnly), filepath.Dir(dir))
		}
		return ca, nil
	}
	if !errors.Is(certErr, os.ErrNotExist) || !errors.Is(keyErr, os.ErrNotExist) {
		return nil, fmt.Errorf("the CA %s and its key %s must both exist or both be missing (%w): delete %s to start the dev environment afresh", certPath, keyPath, errors.Join(certErr, keyErr), filepath.Dir(dir))
	}
	der, key, err := pki.NewCA(commonName, caValidity)
	if err != nil {
		return nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := pki.WriteFileAtomic(keyPath, keyPEM); err != nil {
		return nil, err
	}
	if err := pki.WriteFileAtomic(certPath, certPEM); err != nil {
		return nil, err
	}
	return parseAuthority(certPEM, keyPEM)
}

func parseAuthority(certPEM, keyPEM []byte) (*authority, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: certPEM}, nil
}

// leaf is what a certificate is for.
type leaf struct {
	commonName    string
	organizations []string
	// hosts are DNS names or IP addresses of a serving certificate.
	hosts  []string
	client bool
}

// issue returns a new certificate and key, PEM-encoded (the key in SEC 1
// form, which kube-apiserver reads).
func (ca *authority) issue(l leaf) (certPEM, keyPEM []byte, err error) {
	certPEM, key, err := pki.Sign(ca.cert, ca.key, pki.Leaf{CommonName: l.commonName, Organizations: l.organizations,
		Hosts: l.hosts, Client: l.client, Validity: leafValidity})
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// issueFiles issues a certificate and writes it and its key to
// <dir>/<name>.crt and .key.
func (ca *authority) issueFiles(dir, name string, l leaf) (certFile, keyFile string, err error) {
	c, k, err := ca.issue(l)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := pki.WriteFileAtomic(keyFile, k); err != nil {
		return "", "", err
	}
	if err := pki.WriteFileAtomic(certFile, c); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// loadOrCreateKey returns the path of a persisted private key, creating
// it when missing (the service-account signing key).
func loadOrCreateKey(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if _, err := parseKey(b); err != nil {
			return "", fmt.Errorf("reading the key %s: %w; delete it to generate a new one", path, err)
		}
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	b, err := encodeKey(key)
	if err != nil {
		return "", err
	}
	return path, pki.WriteFileAtomic(path, b)
}

// encodeKey writes an EC key in SEC 1 form ("EC PRIVATE KEY"), which
// kube-apiserver reads for serving, client and service-account keys.
func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	kb, _ := pem.Decode(b)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, errors.New("no PEM EC private key")
	}
	return x509.ParseECPrivateKey(kb.Bytes)
}
