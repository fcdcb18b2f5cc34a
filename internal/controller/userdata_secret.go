package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/userdata"
)

// The user-data Secret is the bootstrap data of the pool's machines (the
// Cluster API contract: key "value", key "format"). Its annotations record
// the hashes it was made for, so what the machines run can always be read
// back. The names live in internal/observe, which decodes
// them for the controller and the CLI.
const (
	// KindUserData is the nodepool.dev/secret-kind of a user-data Secret.
	KindUserData = observe.KindUserData

	annotationRolloutHash           = observe.AnnotationRolloutHash
	annotationRolloutWithoutVersion = observe.AnnotationRolloutWithoutVersion
	annotationVersion               = observe.AnnotationVersion
	annotationStartedPayload        = observe.AnnotationStartedPayload
	annotationTemplate              = observe.AnnotationTemplate
	annotationToken                 = observe.AnnotationTokenRotatedAt
)

func userDataSecret(namespace, cluster, pool string, ud rollout.UserData, pointer []byte, tokenRotatedAt time.Time) *corev1.Secret {
	s := userdata.NewBootstrapSecret(namespace, ud.Name, cluster, pointer)
	s.Labels[secrets.LabelPool] = pool
	s.Labels[secrets.LabelKind] = KindUserData
	s.Annotations = map[string]string{
		annotationRolloutHash:           ud.RolloutHash,
		annotationRolloutWithoutVersion: ud.RolloutWithoutVersion,
		annotationVersion:               ud.Version,
		annotationStartedPayload:        ud.PayloadHash,
		annotationTemplate:              ud.TemplateName,
		annotationToken:                 secrets.FormatTime(tokenRotatedAt),
	}
	if ud.TemplateKind != "" {
		s.Annotations[observe.AnnotationTemplateKind] = ud.TemplateKind
	}
	return s
}
