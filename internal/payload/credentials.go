package payload

import (
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"nodepool.dev/nodepool/internal/inputs"
)

const (
	// PullSecretPath is where the kubelet and CRI-O read registry credentials.
	PullSecretPath = "/var/lib/kubelet/config.json"
	// TrustBundlePath is where the OS trust store picks up extra CAs.
	TrustBundlePath = "/etc/pki/ca-trust/source/anchors/nodepool-trust-bundle.crt"
)

func renderPullSecret(in *inputs.Inputs) (igntypes.Config, error) {
	if len(in.PullSecret) == 0 {
		return emptyConfig(), nil
	}
	return withFiles(file(PullSecretPath, 0o600, []byte(in.PullSecret))), nil
}

func renderTrustBundle(in *inputs.Inputs) (igntypes.Config, error) {
	if in.TrustBundle == "" {
		return emptyConfig(), nil
	}
	return withFiles(file(TrustBundlePath, 0o644, []byte(in.TrustBundle))), nil
}
