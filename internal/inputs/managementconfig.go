package inputs

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// DefaultManagementConfig is where the platform's management config lives
// unless the controller is told otherwise.
var DefaultManagementConfig = types.NamespacedName{Namespace: "nodepool-system", Name: "management-config"}

// ManagementConfigKey is the management config the settings name:
// DefaultManagementConfig when unset.
func (s Settings) ManagementConfigKey() types.NamespacedName {
	if s.ManagementConfig == (types.NamespacedName{}) {
		return DefaultManagementConfig
	}
	return s.ManagementConfig
}

// ManagementConfigKey is the key of the management config ConfigMap that
// holds its YAML.
const ManagementConfigKey = "config"

// DefaultMetadataAddress is the cloud metadata address nodes reach without
// a proxy unless the management config says otherwise.
const DefaultMetadataAddress = "169.254.169.254"

// ManagementConfig is the platform's configuration of every pool: the
// ConfigMap's key "config", for example
//
//	apiServerProxyImage: registry.example/haproxy@sha256:...
//	registryOverrides:
//	  - {source: quay.io/openshift, mirror: mirror.platform/openshift}
//	noProxy: [.internal.example]
//	metadataAddress: 169.254.169.254
//
// A change of any of it never rolls a pool: it is management drift.
type ManagementConfig struct {
	// APIServerProxyImage is the image of the API-server proxy static pod
	// on every node (an haproxy image). Required. Component APIServerProxy.
	APIServerProxyImage string `json:"apiServerProxyImage"`
	// RegistryOverrides redirect image pulls from a source to a mirror;
	// they win over an owner's registry mirror of the same source.
	// Component RegistryOverrides.
	RegistryOverrides []RegistryOverride `json:"registryOverrides,omitempty"`
	// NoProxy are extra hosts, domains or CIDRs nodes reach without a
	// proxy. Component ProxyDefaults.
	NoProxy []string `json:"noProxy,omitempty"`
	// MetadataAddress is the cloud metadata address, default
	// 169.254.169.254. Component ProxyDefaults.
	MetadataAddress string `json:"metadataAddress,omitempty"`
}

// RegistryOverride redirects pulls of images under Source to Mirror.
type RegistryOverride struct {
	Source string `json:"source"`
	Mirror string `json:"mirror"`
}

// ParseManagementConfig reads and validates the management config YAML,
// applies defaults and normalises it (overrides sorted by source, NoProxy
// sorted and deduplicated). Errors are *FieldError naming the field.
func ParseManagementConfig(data []byte) (ManagementConfig, error) {
	var mc ManagementConfig
	if err := yaml.UnmarshalStrict(data, &mc); err != nil {
		return ManagementConfig{}, fmt.Errorf("is not a valid management config: %w; the fields are apiServerProxyImage, registryOverrides, noProxy and metadataAddress", err)
	}
	var errs []error
	if err := validateImage(mc.APIServerProxyImage); err != nil {
		errs = append(errs, &FieldError{Field: "apiServerProxyImage", Err: err})
	}
	seen := map[string]int{}
	for i, o := range mc.RegistryOverrides {
		if err := validateRegistryLocation(o.Source); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("registryOverrides[%d].source", i), Err: err})
		}
		if err := validateRegistryLocation(o.Mirror); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("registryOverrides[%d].mirror", i), Err: err})
		}
		if j, dup := seen[o.Source]; dup {
			errs = append(errs, fieldErr(fmt.Sprintf("registryOverrides[%d].source", i), "%q is also registryOverrides[%d].source: keep one override per source", o.Source, j))
		}
		seen[o.Source] = i
	}
	for i, n := range mc.NoProxy {
		if err := validateNoProxy(n); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("noProxy[%d]", i), Err: err})
		}
	}
	if mc.MetadataAddress == "" {
		mc.MetadataAddress = DefaultMetadataAddress
	} else if net.ParseIP(mc.MetadataAddress) == nil {
		errs = append(errs, fieldErr("metadataAddress", "%q is not an IP address: set the cloud's metadata IP or leave it out for %s", mc.MetadataAddress, DefaultMetadataAddress))
	}
	if len(errs) > 0 {
		return ManagementConfig{}, joinErrors(errs)
	}
	slices.SortFunc(mc.RegistryOverrides, func(a, b RegistryOverride) int { return strings.Compare(a.Source, b.Source) })
	mc.NoProxy = normalizeList(mc.NoProxy)
	return mc, nil
}
