package payload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strings"

	"nodepool.dev/nodepool/internal/inputs"
)

// Hashes of a pool's current inputs, each a hex sha256.
type Hashes struct {
	// Rollout covers owner intent (the rollout components, release version
	// included). Only it decides rollouts; it names user-data and token
	// Secrets.
	Rollout string
	// RolloutWithoutVersion is Rollout without the release version: when it
	// changes, the configuration is updating (UpdatingConfig).
	RolloutWithoutVersion string
	// Payload covers every component of the latest payload (its manifest):
	// it names what a node boots and the payload Secret.
	Payload string
}

// Headers of the canonical serialisations. Bumping one changes every hash
// of its kind; bumping the rollout one rolls every pool of every user.
// The payload hash covers the fragments, not what Compose adds to them
// (the node identity) or the order it merges them in: bump the payload
// header when those change, so that one payload hash always names one
// Ignition config. That makes every pool report drift, and rolls nothing.
const (
	rolloutHashHeader = "nodepool.dev/rollout-hash/v1\n"
	payloadHashHeader = "nodepool.dev/payload-hash/v1\n"
)

// RolloutHash is the hash of a pool's owner intent: sha256 over the
// canonical intent (inputs.Intent) of each set rollout component, by name.
func RolloutHash(in *inputs.Inputs) (string, error) { return rolloutHash(in, true) }

// RolloutHashWithoutVersion is RolloutHash without the release version.
func RolloutHashWithoutVersion(in *inputs.Inputs) (string, error) { return rolloutHash(in, false) }

func rolloutHashes(in *inputs.Inputs) (Hashes, error) {
	var h Hashes
	var err error
	if h.Rollout, err = RolloutHash(in); err != nil {
		return Hashes{}, err
	}
	if h.RolloutWithoutVersion, err = RolloutHashWithoutVersion(in); err != nil {
		return Hashes{}, err
	}
	return h, nil
}

func rolloutHash(in *inputs.Inputs, withVersion bool) (string, error) {
	h := sha256.New()
	h.Write([]byte(rolloutHashHeader))
	for _, c := range byName(inputs.Components()) {
		if !c.IsRollout() {
			continue
		}
		b, err := in.Intent(c, withVersion)
		if err != nil {
			return "", fmt.Errorf("rollout hash: %w", err)
		}
		if b == nil {
			continue
		}
		writeRecord(h, c.Name(), b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashOf is the payload hash of pool's payload of manifest m: what a
// payload Secret's manifest must give to be the payload its hash names.
func HashOf(pool string, m Manifest) string { return payloadHash(pool, m) }

// payloadHash is sha256 over the pool name and the manifest, by component
// name.
func payloadHash(pool string, m Manifest) string {
	h := sha256.New()
	h.Write([]byte(payloadHashHeader))
	writeRecord(h, "pool", []byte(pool))
	cs := make([]inputs.Component, 0, len(m))
	for c := range m {
		cs = append(cs, c)
	}
	for _, c := range byName(cs) {
		writeRecord(h, c.Name(), []byte(m[c]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeRecord writes "<name> <length>\n<value>\n": unambiguous whatever the
// value holds.
func writeRecord(h hash.Hash, name string, value []byte) {
	fmt.Fprintf(h, "%s %d\n", name, len(value))
	h.Write(value)
	h.Write([]byte{'\n'})
}

func byName(cs []inputs.Component) []inputs.Component {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b inputs.Component) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}
