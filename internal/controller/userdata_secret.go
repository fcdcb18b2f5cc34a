package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/userdata"
)

// The user-data Secret is the bootstrap data of the pool's machines (the
// Cluster API contract: key "value", key "format"). Its annotations record
// the hashes it was made for, so what the machines run can always be read
// back (DESIGN.md §5).
const (
	// KindUserData is the nodepool.dev/secret-kind of a user-data Secret.
	KindUserData = "user-data"

	annotationRolloutHash           = "nodepool.dev/rollout-hash"
	annotationRolloutWithoutVersion = "nodepool.dev/rollout-config"
	annotationVersion               = "nodepool.dev/version"
	annotationStartedPayload        = "nodepool.dev/started-payload"
	annotationTemplate              = "nodepool.dev/infrastructure-template"
	annotationToken                 = "nodepool.dev/token-rotated-at"
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
	return s
}

func decodeUserData(s *corev1.Secret) rollout.UserData {
	a := s.Annotations
	return rollout.UserData{
		Name:                  s.Name,
		RolloutHash:           a[annotationRolloutHash],
		RolloutWithoutVersion: a[annotationRolloutWithoutVersion],
		Version:               a[annotationVersion],
		PayloadHash:           a[annotationStartedPayload],
		TemplateName:          a[annotationTemplate],
		Created:               s.CreationTimestamp.Time,
	}
}
