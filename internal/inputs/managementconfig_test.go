package inputs_test

import (
	"errors"
	"strings"
	"testing"

	"nodepool.dev/nodepool/internal/inputs"
)

const proxyImage = "registry.example/haproxy@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestParseManagementConfigNormalises(t *testing.T) {
	mc, err := inputs.ParseManagementConfig([]byte(`apiServerProxyImage: ` + proxyImage + `
registryOverrides:
  - {source: quay.io/z, mirror: mirror.example/z}
  - {source: docker.io, mirror: "mirror.example:5000/hub"}
noProxy: [b.example, .a.example, b.example]
`))
	if err != nil {
		t.Fatal(err)
	}
	if mc.MetadataAddress != inputs.DefaultMetadataAddress {
		t.Errorf("metadataAddress %q, want the default", mc.MetadataAddress)
	}
	if mc.RegistryOverrides[0].Source != "docker.io" {
		t.Errorf("overrides not sorted by source: %+v", mc.RegistryOverrides)
	}
	if strings.Join(mc.NoProxy, ",") != ".a.example,b.example" {
		t.Errorf("noProxy %v, want sorted and deduplicated", mc.NoProxy)
	}
}

func TestParseManagementConfigNamesTheField(t *testing.T) {
	tests := []struct {
		name, yaml, field, problem string
	}{
		{"missing image", "noProxy: [a]\n", "apiServerProxyImage", "is empty"},
		{"bad image", "apiServerProxyImage: 'http://x/y'\n", "apiServerProxyImage", "not a valid image reference"},
		{"unknown field", "apiServerProxyImage: " + proxyImage + "\nregistryOverride: []\n", "", "registryOverride"},
		{"bad override source", "apiServerProxyImage: " + proxyImage + "\nregistryOverrides: [{source: '*.io', mirror: m.example}]\n", "registryOverrides[0].source", "not a registry"},
		{"bad override mirror", "apiServerProxyImage: " + proxyImage + "\nregistryOverrides: [{source: quay.io, mirror: ''}]\n", "registryOverrides[0].mirror", "is empty"},
		{"duplicate override", "apiServerProxyImage: " + proxyImage + "\nregistryOverrides: [{source: quay.io, mirror: a.example}, {source: quay.io, mirror: b.example}]\n", "registryOverrides[1].source", "keep one override per source"},
		{"bad noProxy", "apiServerProxyImage: " + proxyImage + "\nnoProxy: ['a;b']\n", "noProxy[0]", "is not a host"},
		{"bad metadata address", "apiServerProxyImage: " + proxyImage + "\nmetadataAddress: metadata.local\n", "metadataAddress", "not an IP address"},
		{"not YAML", "apiServerProxyImage: [\n", "", "not a valid management config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := inputs.ParseManagementConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("error %q does not say %q", err, tt.problem)
			}
			if tt.field == "" {
				return
			}
			var fe *inputs.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error %q does not name field %s", err, tt.field)
			}
		})
	}
}
