package payload

import (
	"fmt"
	"slices"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

// The proxy is two components: the owner's settings as written (rollout)
// and the NoProxy entries the platform computes (management, pinned). Each
// has its own file so that a platform change touches only its fragment; a
// oneshot unit combines them at boot into the environment file that the
// kubelet and the container runtime read.
const (
	ProxyEnvPath         = "/etc/nodepool/proxy.env"
	ProxyDefaultsEnvPath = "/etc/nodepool/proxy-defaults.env"
	proxyScriptPath      = "/etc/nodepool/proxy-env.sh"
	proxyUnit            = "nodepool-proxy-env.service"
	proxyDropin          = "10-nodepool-proxy.conf"
)

// proxyScript combines the two files into /run/nodepool/proxy.env. The
// values were validated to hold no quotes, '$', backslashes or whitespace.
const proxyScript = `#!/bin/sh
# Rendered by nodepool. Combines the pool's proxy as its owner wrote it
# (` + ProxyEnvPath + `) with the NoProxy entries the platform computes
# (` + ProxyDefaultsEnvPath + `) into /run/nodepool/proxy.env.
set -eu
. ` + ProxyEnvPath + `
if [ -f ` + ProxyDefaultsEnvPath + ` ]; then . ` + ProxyDefaultsEnvPath + `; fi
no_proxy="${NODEPOOL_OWNER_NO_PROXY:-}"
if [ -n "${NODEPOOL_DEFAULT_NO_PROXY:-}" ]; then
  no_proxy="${no_proxy:+$no_proxy,}$NODEPOOL_DEFAULT_NO_PROXY"
fi
mkdir -p /run/nodepool
tmp=/run/nodepool/proxy.env.tmp
{
  if [ -n "${HTTP_PROXY:-}" ]; then printf 'HTTP_PROXY=%s\nhttp_proxy=%s\n' "$HTTP_PROXY" "$HTTP_PROXY"; fi
  if [ -n "${HTTPS_PROXY:-}" ]; then printf 'HTTPS_PROXY=%s\nhttps_proxy=%s\n' "$HTTPS_PROXY" "$HTTPS_PROXY"; fi
  printf 'NO_PROXY=%s\nno_proxy=%s\n' "$no_proxy" "$no_proxy"
} > "$tmp"
mv "$tmp" /run/nodepool/proxy.env
`

const proxyUnitContents = `[Unit]
Description=Combine the pool's proxy with the platform's NoProxy defaults
Before=kubelet.service crio.service containerd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh ` + proxyScriptPath + `

[Install]
WantedBy=multi-user.target
`

const proxyDropinContents = `[Unit]
Wants=` + proxyUnit + `
After=` + proxyUnit + `

[Service]
EnvironmentFile=/run/nodepool/proxy.env
`

// proxiedUnits read the combined proxy environment. A drop-in for a unit
// the OS does not have is ignored by systemd.
var proxiedUnits = []string{"containerd.service", "crio.service", "kubelet.service"}

func renderProxy(in *inputs.Inputs) (igntypes.Config, error) {
	p := in.Proxy
	if p.IsZero() {
		return emptyConfig(), nil
	}
	var env strings.Builder
	env.WriteString("# Rendered by nodepool from the NodePool's spec.proxy.\n")
	fmt.Fprintf(&env, "HTTP_PROXY=%q\n", p.HTTPProxy)
	fmt.Fprintf(&env, "HTTPS_PROXY=%q\n", p.HTTPSProxy)
	fmt.Fprintf(&env, "NODEPOOL_OWNER_NO_PROXY=%q\n", strings.Join(p.NoProxy, ","))

	cfg := withFiles(
		file(ProxyEnvPath, 0o644, []byte(env.String())),
		file(proxyScriptPath, 0o755, []byte(proxyScript)),
	)
	cfg.Systemd.Units = append(cfg.Systemd.Units, igntypes.Unit{Name: proxyUnit, Enabled: ptr(true), Contents: ptr(proxyUnitContents)})
	for _, u := range proxiedUnits {
		cfg.Systemd.Units = append(cfg.Systemd.Units, dropin(u, proxyDropin, proxyDropinContents))
	}
	return cfg, nil
}

// ComputedNoProxy is the NoProxy list the platform adds to every pool's
// proxy: the cluster's pod and service networks, the metadata address,
// loopback, in-cluster service names and the management config's extras;
// sorted and deduplicated.
func ComputedNoProxy(in *inputs.Inputs) []string {
	var out []string
	out = append(out, in.Cluster.PodCIDRs...)
	out = append(out, in.Cluster.ServiceCIDRs...)
	out = append(out, in.Management.MetadataAddress, "localhost", "127.0.0.1", ".svc")
	if in.Cluster.ServiceDomain != "" {
		out = append(out, "."+in.Cluster.ServiceDomain)
	}
	out = append(out, in.Management.NoProxy...)
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

func renderProxyDefaults(in *inputs.Inputs) (igntypes.Config, error) {
	var env strings.Builder
	env.WriteString("# Rendered by nodepool: NoProxy entries the platform computes.\n")
	fmt.Fprintf(&env, "NODEPOOL_DEFAULT_NO_PROXY=%q\n", strings.Join(ComputedNoProxy(in), ","))
	return withFiles(file(ProxyDefaultsEnvPath, 0o644, []byte(env.String()))), nil
}
