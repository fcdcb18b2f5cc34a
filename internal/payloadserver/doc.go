// Package payloadserver is the payload server: HTTPS-only GET /ignition answers a valid
// bearer token with its pool's payload from an in-memory index of Secrets fed by an informer, and 511
// otherwise; /healthz, /readyz and /metrics are on a separate plain-HTTP port (Kubernetes convention).
package payloadserver
