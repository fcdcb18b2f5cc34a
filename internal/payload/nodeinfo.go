package payload

import (

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

// Files under /etc/nodepool tell a node (and whoever debugs it) what its
// payload was made from. Each belongs to one component.
const (
	ReleasePath                = "/etc/nodepool/release.json"
	PullSecretRefPath          = "/etc/nodepool/refs/pull-secret"
	TrustBundleRefPath         = "/etc/nodepool/refs/trust-bundle"
	PayloadServerPath          = "/etc/nodepool/payload-server.json"
	RendererPath               = "/etc/nodepool/renderer.json"
	InfrastructureTemplatePath = "/etc/nodepool/infrastructure-template.json"
)

func renderRelease(in *inputs.Inputs) (igntypes.Config, error) {
	b, err := jsonFile(struct {
		Version string `json:"version"`
		Image   string `json:"image,omitempty"`
	}{in.Release.Version, in.Release.Image})
	if err != nil {
		return igntypes.Config{}, err
	}
	return withFiles(file(ReleasePath, 0o644, b)), nil
}

func renderPullSecretRef(in *inputs.Inputs) (igntypes.Config, error) {
	if in.PullSecretRef == "" {
		return emptyConfig(), nil
	}
	return withFiles(file(PullSecretRefPath, 0o644, []byte(in.PullSecretRef+"\n"))), nil
}

func renderTrustBundleRef(in *inputs.Inputs) (igntypes.Config, error) {
	if in.TrustBundleRef == "" {
		return emptyConfig(), nil
	}
	return withFiles(file(TrustBundleRefPath, 0o644, []byte(in.TrustBundleRef+"\n"))), nil
}

// renderPayloadServer writes where the pool's payloads are served, for a
// node agent that updates a node in place.
func renderPayloadServer(in *inputs.Inputs) (igntypes.Config, error) {
	b, err := jsonFile(struct {
		URL string `json:"url"`
		CA  string `json:"ca"`
	}{in.PayloadServer.URL, string(in.PayloadServer.CA)})
	if err != nil {
		return igntypes.Config{}, err
	}
	return withFiles(file(PayloadServerPath, 0o644, b)), nil
}

func renderRenderer(in *inputs.Inputs) (igntypes.Config, error) {
	b, err := jsonFile(struct {
		Version string `json:"version"`
	}{in.RendererVersion})
	if err != nil {
		return igntypes.Config{}, err
	}
	return withFiles(file(RendererPath, 0o644, b)), nil
}

// renderInfrastructureTemplate records which template the node was made
// from, by content: the template itself is not part of the payload.
func renderInfrastructureTemplate(in *inputs.Inputs) (igntypes.Config, error) {
	b, err := jsonFile(struct {
		APIGroup string `json:"apiGroup"`
		Kind     string `json:"kind"`
		Spec     string `json:"spec"`
	}{in.InfrastructureTemplate.APIGroup, in.InfrastructureTemplate.Kind, "sha256:" + TemplateHash(in.InfrastructureTemplate)})
	if err != nil {
		return igntypes.Config{}, err
	}
	return withFiles(file(InfrastructureTemplatePath, 0o644, b)), nil
}

// TemplateHash is the hex sha256 of an infrastructure template's spec (its
// canonical JSON): the clone is named after it.
func TemplateHash(t inputs.TemplateInput) string { return t.Hash() }
