package capi

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// ServedVersion is the only Cluster API version served: without the
// conversion webhook, serving v1beta1 beside it would corrupt objects.
const ServedVersion = "v1beta2"

// crdFS holds verbatim copies of <sigs.k8s.io/cluster-api>/core/config/crd/bases,
// refreshed by `make generate` and checked by TestCAPICRDsAreCurrent.
//
//go:embed crds/*.yaml
var crdFS embed.FS

// RawCRDs returns the embedded CRD files by name, as Cluster API ships them.
func RawCRDs() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(crdFS, "crds", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := crdFS.ReadFile(path)
		if err != nil {
			return err
		}
		out[d.Name()] = b
		return nil
	})
	return out, err
}

// CRDs returns the Cluster API core CRDs trimmed to serve and store v1beta2 only.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := RawCRDs()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(bytes.TrimSpace(raw[n]), crd); err != nil {
			return nil, fmt.Errorf("parsing Cluster API CRD %s: %w", n, err)
		}
		var kept []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == ServedVersion {
				v.Served, v.Storage = true, true
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("Cluster API CRD %s has no version %s", n, ServedVersion)
		}
		crd.Spec.Versions = kept
		crd.Spec.Conversion = nil
		out = append(out, crd)
	}
	return out, nil
}
