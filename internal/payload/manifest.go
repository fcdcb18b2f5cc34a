package payload

import (
	"crypto/sha256"
	"encoding/hex"

	"nodepool.dev/nodepool/internal/inputs"
)

// Manifest maps each component of a payload to the digest of its fragment,
// "sha256:<hex>". Any two payloads compare component by component through
// their manifests. It encodes to JSON as {"<component name>": "<digest>"}.
type Manifest map[inputs.Component]string

// Digest is the digest of a fragment as it appears in a manifest.
func Digest(fragment []byte) string {
	sum := sha256.Sum256(fragment)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Change is a component whose digest differs between two manifests. An
// empty digest means the component is absent from that manifest.
type Change struct {
	Component inputs.Component
	// From is the digest in the first manifest (such as what the running
	// nodes booted), To the one in the second (such as the latest payload).
	From, To string
}

// Diff returns the components whose digests differ between from and to, in
// the order of inputs.Components(). The controller reports the management
// ones as drift (ConfigUpdatePending, status.pendingManagementChanges).
func Diff(from, to Manifest) []Change {
	var out []Change
	for _, c := range inputs.Components() {
		if from[c] != to[c] {
			out = append(out, Change{Component: c, From: from[c], To: to[c]})
		}
	}
	return out
}

// ManagementDrift returns the management components whose digests differ
// between running (the payload the pool's nodes booted) and latest: the
// rows of status.pendingManagementChanges. Rollout components are left out:
// their changes are owner intent and roll the pool.
func ManagementDrift(running, latest Manifest) []Change {
	var out []Change
	for _, ch := range Diff(running, latest) {
		if !ch.Component.IsRollout() {
			out = append(out, ch)
		}
	}
	return out
}
