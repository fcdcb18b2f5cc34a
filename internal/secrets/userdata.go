package secrets

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/userdata"
)

// The user-data Secret is the bootstrap data of the pool's machines (the
// Cluster API contract: key "value", key "format", see
// userdata.NewBootstrapSecret). Its annotations record the hashes it was
// made for, so what the machines run can always be read back.
const (
	// KindUserData is the LabelKind of a user-data Secret.
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

// UserData is what a user-data Secret records besides its pointer config.
type UserData struct {
	RolloutHash, RolloutWithoutVersion, Version string
	// StartedPayload is the payload its rollout started with.
	StartedPayload string
	// Template and TemplateKind name the infrastructure template clone.
	Template, TemplateKind string
	// TokenRotatedAt is when the token its pointer config carries was made.
	TokenRotatedAt time.Time
	// UnreferencedSince is set once nothing uses it (nil while in use).
	UnreferencedSince *time.Time
}

// NewUserDataSecret returns the user-data Secret namespace/name of a pool
// of cluster: the bootstrap data Secret holding pointer, labelled as the
// pool's, annotated with u. UnreferencedSince is the controller's mark, set
// apart (MarkUnreferenced).
func NewUserDataSecret(namespace, name, cluster, pool string, u UserData, pointer []byte) *corev1.Secret {
	s := userdata.NewBootstrapSecret(namespace, name, cluster, pointer)
	s.Labels[LabelPool] = pool
	s.Labels[LabelKind] = KindUserData
	s.Annotations = map[string]string{
		AnnotationRolloutHash:           u.RolloutHash,
		AnnotationRolloutWithoutVersion: u.RolloutWithoutVersion,
		AnnotationVersion:               u.Version,
		AnnotationStartedPayload:        u.StartedPayload,
		AnnotationTemplate:              u.Template,
		AnnotationTokenRotatedAt:        FormatTime(u.TokenRotatedAt),
	}
	if u.TemplateKind != "" {
		s.Annotations[AnnotationTemplateKind] = u.TemplateKind
	}
	return s
}

// DecodeUserData reads what a user-data Secret records.
func DecodeUserData(s *corev1.Secret) UserData {
	a := s.Annotations
	u := UserData{
		RolloutHash: a[AnnotationRolloutHash], RolloutWithoutVersion: a[AnnotationRolloutWithoutVersion],
		Version: a[AnnotationVersion], StartedPayload: a[AnnotationStartedPayload],
		Template: a[AnnotationTemplate], TemplateKind: a[AnnotationTemplateKind],
	}
	if t, err := time.Parse(time.RFC3339, a[AnnotationTokenRotatedAt]); err == nil {
		u.TokenRotatedAt = t
	}
	if t, err := time.Parse(time.RFC3339, a[AnnotationUnreferencedSince]); err == nil {
		u.UnreferencedSince = &t
	}
	return u
}

// MarkUnreferenced sets (at non-nil) or clears the unreferenced mark on
// annotations.
func MarkUnreferenced(annotations map[string]string, at *time.Time) {
	if at != nil {
		annotations[AnnotationUnreferencedSince] = FormatTime(*at)
		return
	}
	delete(annotations, AnnotationUnreferencedSince)
}
