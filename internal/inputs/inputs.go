package inputs

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// Inputs is everything a pool's payload depends on, read once per reconcile
// by Gather. It holds no client and no pointer into the objects it was read
// from. Fields are normalised (lists sorted where order means nothing), so
// equal intent gives equal Inputs. Node labels, taints, drain timeout,
// replicas and the management policy are not here: they change no payload.
type Inputs struct {
	// Pool is the NodePool's namespace and name.
	Pool types.NamespacedName

	// Release is spec.release. Component Release.
	Release ReleaseInput
	// UserConfigs are the parsed and merged documents of spec.config.
	// Component UserConfigs.
	UserConfigs UserConfigSet
	// PullSecretRef is spec.pullSecretRef.name, or "". Component PullSecretRef.
	PullSecretRef string
	// PullSecret is the referenced Secret's .dockerconfigjson. Component
	// PullSecret. It prints as "[redacted]".
	PullSecret SecretBytes
	// TrustBundleRef is spec.additionalTrustBundleRef.name, or "".
	// Component TrustBundleRef.
	TrustBundleRef string
	// TrustBundle is the referenced ConfigMap's ca-bundle.crt (PEM).
	// Component TrustBundle.
	TrustBundle string
	// Proxy is spec.proxy as written, NoProxy sorted; zero when unset.
	// Component Proxy.
	Proxy ProxyInput
	// RegistryMirrors is spec.registryMirrors sorted by source. Component
	// RegistryMirrors.
	RegistryMirrors []RegistryMirror
	// Cluster is what the payload needs of the CAPI Cluster: its networks
	// (component ProxyDefaults) and its control-plane endpoint (component
	// APIServerEndpoint).
	Cluster ClusterInput
	// Management is the validated management config. Components
	// APIServerProxy, RegistryOverrides and ProxyDefaults.
	Management ManagementConfig
	// PayloadServer is where nodes fetch payloads. Component PayloadServer.
	PayloadServer PayloadServerInput
	// RendererVersion is the nodepool build. Component Renderer.
	RendererVersion string
	// InfrastructureTemplate is the referenced template. Component
	// InfrastructureTemplate.
	InfrastructureTemplate TemplateInput

	// Sources lists the ConfigMaps and Secrets read, with a digest of their
	// data, for the rollout history. Not a hash input.
	Sources []Source
}

// ReleaseInput is what the nodes run.
type ReleaseInput struct {
	// Version is the Kubernetes version, such as v1.36.3.
	Version string
	// Image is the optional OS or release image.
	Image string
}

// ProxyInput is the owner's proxy. The zero value means no proxy.
type ProxyInput struct {
	HTTPProxy  string
	HTTPSProxy string
	// NoProxy as written, sorted and deduplicated.
	NoProxy []string
}

// IsZero reports whether no proxy is configured.
func (p ProxyInput) IsZero() bool {
	return p.HTTPProxy == "" && p.HTTPSProxy == "" && len(p.NoProxy) == 0
}

// RegistryMirror redirects pulls of images under Source to Mirrors, in order.
type RegistryMirror struct {
	Source  string
	Mirrors []string
}

// ClusterInput is what a payload needs of the CAPI Cluster.
type ClusterInput struct {
	// PodCIDRs and ServiceCIDRs are spec.clusterNetwork.{pods,services}.cidrBlocks, sorted.
	PodCIDRs     []string
	ServiceCIDRs []string
	// ServiceDomain is spec.clusterNetwork.serviceDomain, default cluster.local.
	ServiceDomain string
	// Endpoint is spec.controlPlaneEndpoint; the port defaults to 6443.
	Endpoint Endpoint
}

// Endpoint is a host and port.
type Endpoint struct {
	Host string
	Port int32
}

// PayloadServerInput is where nodes fetch payloads.
type PayloadServerInput struct {
	// URL of the payload server's /ignition endpoint.
	URL string
	// CA is the PEM bundle that signs the payload server's certificate.
	CA []byte
}

// TemplateInput is the infrastructure machine template a pool's machines
// are made from.
type TemplateInput struct {
	APIGroup string
	Kind     string
	// Version is the API version the template was read at (the newest the
	// provider's CRD says implements the contract). It is not hashed: a
	// provider serving a new version of the same content rolls nothing.
	Version string
	// Spec is the template's spec as canonical JSON (keys sorted): as
	// served, or, when Pinned, as it was when a clone of the same
	// generation was made (see pinnedTemplateSpec).
	Spec []byte
	// UID and Generation identify the template and its spec's version.
	// They are not hashed.
	UID        types.UID
	Generation int64
	Pinned     bool
}

// Hash is the hex sha256 of the template's spec (its canonical JSON):
// the clone is named after it.
func (t TemplateInput) Hash() string {
	sum := sha256.Sum256(t.Spec)
	return hex.EncodeToString(sum[:])
}

// Source is one ConfigMap or Secret read for a pool.
type Source struct {
	Kind string
	Name string
	// Digest is "sha256:<hex>" over the object's data in canonical form.
	Digest string
}

// SecretBytes is secret content: fmt prints it as "[redacted]", so logging
// an Inputs never leaks a credential.
type SecretBytes []byte

func (s SecretBytes) String() string { return "[redacted]" }

// GoString keeps %#v from printing the content too.
func (s SecretBytes) GoString() string { return "[redacted]" }
