package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// userDataSecret is the user-data Secret of ud carrying pointer.
func userDataSecret(namespace, cluster, pool string, ud rollout.UserData, pointer []byte, tokenRotatedAt time.Time) *corev1.Secret {
	return secrets.NewUserDataSecret(namespace, ud.Name, cluster, pool, secrets.UserData{
		RolloutHash: ud.RolloutHash, RolloutWithoutVersion: ud.RolloutWithoutVersion, Version: ud.Version,
		StartedPayload: ud.PayloadHash, Template: ud.TemplateName, TemplateKind: ud.TemplateKind, TokenRotatedAt: tokenRotatedAt,
	}, pointer)
}
