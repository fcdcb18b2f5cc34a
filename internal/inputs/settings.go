package inputs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Keys of referenced objects.
const (
	// PullSecretKey is the key of a kubernetes.io/dockerconfigjson Secret.
	PullSecretKey = corev1.DockerConfigJsonKey
	// TrustBundleKey is the key of the trust bundle ConfigMap.
	TrustBundleKey = "ca-bundle.crt"
)

// Settings are the controller's own inputs to every payload.
type Settings struct {
	// ManagementConfig is the management config ConfigMap; zero means
	// DefaultManagementConfig.
	ManagementConfig types.NamespacedName
	// PayloadServerURL is the https URL of the payload server's /ignition.
	PayloadServerURL string
	// PayloadServerCA is the PEM bundle that signs the payload server's
	// certificate.
	PayloadServerCA []byte
	// RendererVersion is the nodepool build, such as v0.3.1 or a commit.
	RendererVersion string
}

// Validate checks the settings; an error means the controller is
// misconfigured, not a pool.
func (s Settings) Validate() error {
	u, err := url.Parse(s.PayloadServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("payload server URL %q must be an https:// URL with a host: set it to where nodes reach the payload server", s.PayloadServerURL)
	}
	if err := validatePEMCertificates(s.PayloadServerCA); err != nil {
		return fmt.Errorf("payload server CA: %w", err)
	}
	if s.RendererVersion == "" {
		return errors.New("renderer version is empty: set it to the nodepool build version")
	}
	return nil
}

// validatePEMCertificates checks that b holds at least one PEM certificate
// and nothing else.
func validatePEMCertificates(b []byte) error {
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(strings.TrimSpace(string(rest))) > 0 {
				return errors.New("holds text that is not a PEM block: keep only -----BEGIN CERTIFICATE----- blocks")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM block of type %q: keep only certificates, never keys", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("holds no PEM certificate")
	}
	return nil
}
