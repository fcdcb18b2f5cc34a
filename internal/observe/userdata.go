package observe

import (
	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// DecodeUserData is what the engine sees of a user-data Secret.
func DecodeUserData(s *corev1.Secret) rollout.UserData {
	u := secrets.DecodeUserData(s)
	return rollout.UserData{
		Name: s.Name, RolloutHash: u.RolloutHash, RolloutWithoutVersion: u.RolloutWithoutVersion,
		Version: u.Version, PayloadHash: u.StartedPayload, TemplateName: u.Template, TemplateKind: u.TemplateKind,
		Created: s.CreationTimestamp.Time, UnreferencedSince: u.UnreferencedSince,
	}
}
