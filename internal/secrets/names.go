package secrets

import "nodepool.dev/nodepool/internal/payload"

// UserDataSecretName is "<pool>-userdata-<rollout hash>".
func UserDataSecretName(pool, rolloutHash string) string {
	return payload.ObjectName(pool, "-userdata-", rolloutHash)
}

// TokenSecretName is "<pool>-token-<rollout hash>".
func TokenSecretName(pool, rolloutHash string) string {
	return payload.ObjectName(pool, "-token-", rolloutHash)
}

// PayloadSecretName is "<pool>-payload-<payload hash>".
func PayloadSecretName(pool, payloadHash string) string {
	return payload.ObjectName(pool, "-payload-", payloadHash)
}
