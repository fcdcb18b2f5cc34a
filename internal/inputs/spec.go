package inputs

import (
	"fmt"
	"slices"
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// specInputs reads the payload inputs of a pool's spec and validates what
// the API server's schema cannot. Errors are *FieldError.
func specInputs(spec *nodepoolv1.NodePoolSpec, in *Inputs) error {
	var errs []error
	in.Release = ReleaseInput{Version: spec.Release.Version, Image: spec.Release.Image}
	if spec.Release.Image != "" {
		if err := validateImage(spec.Release.Image); err != nil {
			errs = append(errs, &FieldError{Field: "spec.release.image", Err: err})
		}
	}
	if spec.PullSecretRef != nil {
		in.PullSecretRef = spec.PullSecretRef.Name
	}
	if spec.AdditionalTrustBundleRef != nil {
		in.TrustBundleRef = spec.AdditionalTrustBundleRef.Name
	}
	if p := spec.Proxy; p != nil {
		for field, u := range map[string]string{"spec.proxy.httpProxy": p.HTTPProxy, "spec.proxy.httpsProxy": p.HTTPSProxy} {
			if u == "" {
				continue
			}
			if err := validateProxyURL(u); err != nil {
				errs = append(errs, &FieldError{Field: field, Err: err})
			}
		}
		for i, n := range p.NoProxy {
			if err := validateNoProxy(n); err != nil {
				errs = append(errs, &FieldError{Field: fmt.Sprintf("spec.proxy.noProxy[%d]", i), Err: err})
			}
		}
		in.Proxy = ProxyInput{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: normalizeList(p.NoProxy)}
	}
	seen := map[string]bool{}
	for i, m := range spec.RegistryMirrors {
		if err := validateRegistryLocation(m.Source); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("spec.registryMirrors[%d].source", i), Err: err})
		}
		if seen[m.Source] {
			errs = append(errs, fieldErr(fmt.Sprintf("spec.registryMirrors[%d].source", i), "%q is listed twice: keep one entry per source", m.Source))
		}
		seen[m.Source] = true
		if len(m.Mirrors) == 0 {
			errs = append(errs, fieldErr(fmt.Sprintf("spec.registryMirrors[%d].mirrors", i), "is empty: list at least one mirror"))
		}
		for j, mirror := range m.Mirrors {
			if err := validateRegistryLocation(mirror); err != nil {
				errs = append(errs, &FieldError{Field: fmt.Sprintf("spec.registryMirrors[%d].mirrors[%d]", i, j), Err: err})
			}
		}
		in.RegistryMirrors = append(in.RegistryMirrors, RegistryMirror{Source: m.Source, Mirrors: slices.Clone(m.Mirrors)})
	}
	slices.SortFunc(in.RegistryMirrors, func(a, b RegistryMirror) int { return strings.Compare(a.Source, b.Source) })
	// Map iteration above is unordered: report errors in a stable order.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return joinErrors(errs)
}
