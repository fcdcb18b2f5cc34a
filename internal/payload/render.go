package payload

import (
	"errors"
	"fmt"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// renderer renders the Ignition fragment of one component from the inputs.
// A fragment depends on nothing but its component's inputs, so its digest
// changes exactly when that component does.
type renderer func(in *inputs.Inputs) (igntypes.Config, error)

// renderers has one entry per component of inputs.Components();
// render_test.go checks that none is missing.
var renderers = map[inputs.Component]renderer{
	inputs.Release:                renderRelease,
	inputs.UserConfigs:            renderUserConfigs,
	inputs.PullSecretRef:          renderPullSecretRef,
	inputs.PullSecret:             renderPullSecret,
	inputs.TrustBundleRef:         renderTrustBundleRef,
	inputs.TrustBundle:            renderTrustBundle,
	inputs.Proxy:                  renderProxy,
	inputs.ProxyDefaults:          renderProxyDefaults,
	inputs.RegistryMirrors:        renderRegistryMirrors,
	inputs.RegistryOverrides:      renderRegistryOverrides,
	inputs.APIServerEndpoint:      renderAPIServerEndpoint,
	inputs.APIServerProxy:         renderAPIServerProxy,
	inputs.PayloadServer:          renderPayloadServer,
	inputs.Renderer:               renderRenderer,
	inputs.InfrastructureTemplate: renderInfrastructureTemplate,
}

// Fragments renders one Ignition fragment per component from the inputs,
// each as canonical JSON.
func Fragments(in *inputs.Inputs) (map[inputs.Component][]byte, error) {
	out := make(map[inputs.Component][]byte, len(renderers))
	for _, c := range inputs.Components() {
		r, ok := renderers[c]
		if !ok {
			return nil, fmt.Errorf("no renderer for payload component %q: this is a bug in nodepool", c)
		}
		cfg, err := r(in)
		if err != nil {
			return nil, fmt.Errorf("rendering component %s: %w", c, err)
		}
		b, err := encode(cfg)
		if err != nil {
			return nil, fmt.Errorf("rendering component %s: %w", c, err)
		}
		out[c] = b
	}
	return out, nil
}

// Render renders the latest payload of a pool (every component from the
// current inputs) and computes its hashes.
//
// A user config that writes where nodepool writes (such as
// /var/lib/kubelet/config.json) is returned as an *inputs.ConfigError naming
// the ConfigMap (reason InvalidConfig). Any other error means the payload
// is not valid (reason InvalidPayload) and says why.
func Render(in *inputs.Inputs) (*Payload, Hashes, error) {
	frags, err := Fragments(in)
	if err != nil {
		return nil, Hashes{}, err
	}
	p, err := Compose(in.Pool.Name, frags)
	if err != nil {
		return nil, Hashes{}, blameUserConfig(in, err)
	}
	h, err := rolloutHashes(in)
	if err != nil {
		return nil, Hashes{}, err
	}
	h.Payload = p.Hash
	return p, h, nil
}

// blameUserConfig turns a conflict between a user config and a component
// nodepool renders into an error on the ConfigMap that the owner can fix.
func blameUserConfig(in *inputs.Inputs, err error) error {
	var ce *ConflictError
	if !errors.As(err, &ce) || (ce.First != inputs.UserConfigs && ce.Second != inputs.UserConfigs) {
		return err
	}
	other := ce.First
	if other == inputs.UserConfigs {
		other = ce.Second
	}
	origin, ok := in.UserConfigs.Origin(ce.Claim)
	if !ok {
		return err
	}
	renders := "its node identity (kubelet labels and manifest)"
	if other != (inputs.Component{}) {
		renders = "component " + other.Name()
	}
	return &inputs.ConfigError{
		Reason: nodepoolv1.ReasonInvalidConfig,
		Kind:   "ConfigMap",
		Object: types.NamespacedName{Namespace: in.Pool.Namespace, Name: origin.ConfigMap},
		Err:    fmt.Errorf("document %d declares %s, which nodepool renders for %s: remove it from your config", origin.Index, ce.Claim, renders),
	}
}

func renderUserConfigs(in *inputs.Inputs) (igntypes.Config, error) {
	if in.UserConfigs.IsEmpty() {
		return emptyConfig(), nil
	}
	return in.UserConfigs.Config, nil
}
