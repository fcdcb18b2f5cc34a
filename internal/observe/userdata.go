package observe

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/rollout"
)

// The user-data Secret is the bootstrap data of the pool's machines (the
// Cluster API contract: key "value", key "format"). Its annotations record
// the hashes it was made for, so what the machines run can always be read
// back. The controller writes them; Read decodes them.
const (
	// KindUserData is the nodepool.dev/secret-kind of a user-data Secret.
	KindUserData = "user-data"

	// AnnotationRolloutHash is the rollout hash a user-data (or token)
	// Secret was made for.
	AnnotationRolloutHash = "nodepool.dev/rollout-hash"
	// AnnotationRolloutWithoutVersion is its rollout hash without version.
	AnnotationRolloutWithoutVersion = "nodepool.dev/rollout-config"
	// AnnotationVersion is its release version.
	AnnotationVersion = "nodepool.dev/version"
	// AnnotationStartedPayload is the payload hash its rollout started with.
	AnnotationStartedPayload = "nodepool.dev/started-payload"
	// AnnotationTemplate is the infrastructure template clone its machines use.
	AnnotationTemplate = "nodepool.dev/infrastructure-template"
	// AnnotationTemplateKind is that clone's "Kind.group".
	AnnotationTemplateKind = "nodepool.dev/infrastructure-template-kind"
	// AnnotationUnreferencedSince is when the controller first found the
	// user-data unused: its cleanup grace period counts from then.
	AnnotationUnreferencedSince = "nodepool.dev/unreferenced-since"
	// AnnotationTokenRotatedAt is when the token it carries was generated.
	AnnotationTokenRotatedAt = "nodepool.dev/token-rotated-at"
)

// DecodeUserData reads the hashes a user-data Secret was made for.
func DecodeUserData(s *corev1.Secret) rollout.UserData {
	a := s.Annotations
	var since *time.Time
	if t, err := time.Parse(time.RFC3339, a[AnnotationUnreferencedSince]); err == nil {
		since = &t
	}
	return rollout.UserData{
		UnreferencedSince:     since,
		Name:                  s.Name,
		RolloutHash:           a[AnnotationRolloutHash],
		RolloutWithoutVersion: a[AnnotationRolloutWithoutVersion],
		Version:               a[AnnotationVersion],
		PayloadHash:           a[AnnotationStartedPayload],
		TemplateName:          a[AnnotationTemplate],
		TemplateKind:          a[AnnotationTemplateKind],
		Created:               s.CreationTimestamp.Time,
	}
}
