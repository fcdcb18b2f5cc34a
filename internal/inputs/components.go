package inputs

import (
	"fmt"
	"strings"
)

// Class says whether a change of a component rolls the pool's machines.
type Class string

const (
	// ClassRollout components are owner intent: a change rolls the machines.
	ClassRollout Class = "rollout"
	// ClassManagement components belong to the platform: a change never rolls
	// the machines by itself; it is reported as management drift.
	ClassManagement Class = "management"
)

// Delivery says what a new node of a pool boots for a management component
// while the running nodes have not been rolled.
type Delivery string

const (
	// DeliveryPinned components stay as they were when the running nodes were
	// made, so new nodes match old ones.
	DeliveryPinned Delivery = "pinned"
	// DeliveryFresh components are always current: a stale credential or
	// endpoint could stop a node from booting at all.
	DeliveryFresh Delivery = "fresh"
)

// Component is one named input of the payload. It has exactly one class and,
// if it is a management component, one delivery. Its fields are unexported:
// the only components are those of the table below, made by rollout() and
// management(), so a component without a class cannot be built outside this
// file (components_test.go checks that every constructor call is in the table).
//
// Component is comparable (use it as a map key) and encodes as its name in
// JSON and YAML, so manifests and fragment maps can be stored and read back.
type Component struct {
	name     string
	class    Class
	delivery Delivery
}

func rollout(name string) Component {
	return Component{name: name, class: ClassRollout}
}

func management(name string, d Delivery) Component {
	return Component{name: name, class: ClassManagement, delivery: d}
}

// The components of a payload. Their names are stable: they
// appear in status, metrics, manifests and the hashes. Never rename one.
var (
	// Release is spec.release: the Kubernetes version and the OS image.
	Release = rollout("release")
	// UserConfigs is the content of the ConfigMaps listed in spec.config.
	UserConfigs = rollout("user-configs")
	// PullSecretRef is the name in spec.pullSecretRef.
	PullSecretRef = rollout("pull-secret-ref")
	// PullSecret is the content of the pull secret: rotating a credential
	// must not roll nodes, and a new node needs the current one.
	PullSecret = management("pull-secret", DeliveryFresh)
	// TrustBundleRef is the name in spec.additionalTrustBundleRef.
	TrustBundleRef = rollout("trust-bundle-ref")
	// TrustBundle is the content of the trust bundle ConfigMap.
	TrustBundle = management("trust-bundle", DeliveryFresh)
	// Proxy is spec.proxy as the owner wrote it.
	Proxy = rollout("proxy")
	// ProxyDefaults are the NoProxy entries the platform computes: cluster
	// networks, the metadata address and the management config's extras.
	ProxyDefaults = management("proxy-defaults", DeliveryPinned)
	// RegistryMirrors is spec.registryMirrors.
	RegistryMirrors = rollout("registry-mirrors")
	// RegistryOverrides are the management config's registry overrides.
	RegistryOverrides = management("registry-overrides", DeliveryPinned)
	// APIServerEndpoint is the Cluster's spec.controlPlaneEndpoint: a stale
	// endpoint breaks nodes, so it is owner intent.
	APIServerEndpoint = rollout("apiserver-endpoint")
	// APIServerProxy is the image of the API-server proxy static pod.
	APIServerProxy = management("apiserver-proxy", DeliveryPinned)
	// PayloadServer is the payload server's URL and CA (controller settings).
	PayloadServer = management("payload-server", DeliveryFresh)
	// Renderer is the version of the nodepool build that rendered the
	// payload: upgrading nodepool never rolls nodes.
	Renderer = management("renderer", DeliveryPinned)
	// InfrastructureTemplate is the spec of the infrastructure machine
	// template that spec.infrastructureTemplateRef points at.
	InfrastructureTemplate = rollout("infrastructure-template")
)

// table is the one table of components, in the order their fragments are
// merged into a payload.
var table = [...]Component{
	Release,
	UserConfigs,
	PullSecretRef,
	PullSecret,
	TrustBundleRef,
	TrustBundle,
	Proxy,
	ProxyDefaults,
	RegistryMirrors,
	RegistryOverrides,
	APIServerEndpoint,
	APIServerProxy,
	PayloadServer,
	Renderer,
	InfrastructureTemplate,
}

// Components returns every component, in merge order. The slice is a copy.
func Components() []Component {
	out := make([]Component, len(table))
	copy(out, table[:])
	return out
}

// PoolOwn says whether the component's value comes from the pool's own
// namespace (its pull secret's or trust bundle's content), where the
// pool's owner changes it. The other management components are the
// platform's, the same for every pool (the management config, the
// controller's settings and build, the proxy defaults it computes): their
// change reaches every pool at once, so it is reported once, on the
// management config, not by an event on each pool.
func (c Component) PoolOwn() bool { return c == PullSecret || c == TrustBundle }

// ParseComponent returns the component with the given name.
func ParseComponent(name string) (Component, error) {
	for _, c := range table {
		if c.name == name {
			return c, nil
		}
	}
	names := make([]string, len(table))
	for i, c := range table {
		names[i] = c.name
	}
	return Component{}, fmt.Errorf("unknown payload component %q (known: %s); was it written by a newer nodepool?", name, strings.Join(names, ", "))
}

// Name is the stable kebab-case name of the component.
func (c Component) Name() string { return c.name }

// String returns the name.
func (c Component) String() string { return c.name }

// Class is rollout or management.
func (c Component) Class() Class { return c.class }

// Delivery is pinned or fresh for a management component, and empty for a
// rollout component (which is the same in every payload of one rollout hash).
func (c Component) Delivery() Delivery { return c.delivery }

// IsRollout reports whether a change of the component rolls the machines.
func (c Component) IsRollout() bool { return c.class == ClassRollout }

// IsFresh reports whether new nodes always get the current value of the
// component, even while older pinned components are kept.
func (c Component) IsFresh() bool { return c.delivery == DeliveryFresh }

// MarshalText encodes the component as its name.
func (c Component) MarshalText() ([]byte, error) {
	if c.name == "" {
		return nil, fmt.Errorf("cannot encode the zero payload component")
	}
	return []byte(c.name), nil
}

// UnmarshalText decodes a component name; unknown names are an error.
func (c *Component) UnmarshalText(b []byte) error {
	parsed, err := ParseComponent(string(b))
	if err != nil {
		return err
	}
	*c = parsed
	return nil
}
