package payload

import (
	"fmt"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

// Registry configuration is two drop-ins of containers-registries.conf(5):
// the owner's mirrors, then the platform's overrides. A later file replaces
// an earlier [[registry]] of the same prefix, so an override wins over an
// owner mirror of the same source.
const (
	RegistryMirrorsPath   = "/etc/containers/registries.conf.d/50-nodepool-mirrors.conf"
	RegistryOverridesPath = "/etc/containers/registries.conf.d/60-nodepool-overrides.conf"
)

// registriesTOML writes [[registry]] tables. Sources and mirrors were
// validated as host[:port][/path], so they need no TOML escaping.
func registriesTOML(header string, mirrors []inputs.RegistryMirror) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rendered by nodepool from %s. Do not edit: the next payload replaces it.\n", header)
	for _, m := range mirrors {
		fmt.Fprintf(&b, "\n[[registry]]\nprefix = %q\nlocation = %q\n", m.Source, m.Source)
		for _, mirror := range m.Mirrors {
			fmt.Fprintf(&b, "\n[[registry.mirror]]\nlocation = %q\n", mirror)
		}
	}
	return []byte(b.String())
}

func renderRegistryMirrors(in *inputs.Inputs) (igntypes.Config, error) {
	if len(in.RegistryMirrors) == 0 {
		return emptyConfig(), nil
	}
	return withFiles(file(RegistryMirrorsPath, 0o644, registriesTOML("the NodePool's spec.registryMirrors", in.RegistryMirrors))), nil
}

func renderRegistryOverrides(in *inputs.Inputs) (igntypes.Config, error) {
	if len(in.Management.RegistryOverrides) == 0 {
		return emptyConfig(), nil
	}
	mirrors := make([]inputs.RegistryMirror, len(in.Management.RegistryOverrides))
	for i, o := range in.Management.RegistryOverrides {
		mirrors[i] = inputs.RegistryMirror{Source: o.Source, Mirrors: []string{o.Mirror}}
	}
	return withFiles(file(RegistryOverridesPath, 0o644, registriesTOML("the platform's management config (registryOverrides)", mirrors))), nil
}
