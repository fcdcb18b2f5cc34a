package secrets_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestObjectNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{secrets.UserDataSecretName("workers", hash), "workers-userdata-0123456789abcdef"},
		{secrets.TokenSecretName("workers", hash), "workers-token-0123456789abcdef"},
		{secrets.PayloadSecretName("workers", hash), "workers-payload-0123456789abcdef"},
		{payload.InfrastructureTemplateName("workers", hash), "workers-0123456789abcdef"},
		{payload.PayloadLabelValue(hash), "0123456789abcdef"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestLongPoolNamesStayValidAndDistinct: names fit the 253 characters of an
// object name, stay DNS subdomains, and two long pools sharing a prefix
// never share a Secret.
func TestLongPoolNamesStayValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 240)
	for _, pool := range []string{long + "-one", long + "-two", strings.Repeat("b.", 126) + "c", strings.Repeat("x", 253)} {
		for _, name := range []string{
			secrets.UserDataSecretName(pool, hash),
			secrets.TokenSecretName(pool, hash),
			secrets.PayloadSecretName(pool, hash),
			payload.InfrastructureTemplateName(pool, hash),
		} {
			if len(name) > payload.MaxNameLength {
				t.Errorf("%q is %d characters", name, len(name))
			}
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Errorf("%q: %v", name, errs)
			}
			if !strings.HasSuffix(name, "-"+hash[:payload.ShortHashLength]) {
				t.Errorf("%q does not end in the short hash", name)
			}
		}
	}
	if secrets.UserDataSecretName(long+"-one", hash) == secrets.UserDataSecretName(long+"-two", hash) {
		t.Error("two long pools share a user-data Secret name")
	}
}

func TestShortHashFitsALabel(t *testing.T) {
	if payload.ShortHashLength > 63 || len(payload.Short(hash)) != payload.ShortHashLength {
		t.Errorf("short hash %q", payload.Short(hash))
	}
	if errs := validation.IsValidLabelValue(payload.PayloadLabelValue(hash)); len(errs) > 0 {
		t.Error(errs)
	}
}
