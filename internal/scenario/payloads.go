package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// Components the model varies. Every other component has a fixed fragment.
var (
	// CompRelease carries the release version (owner intent).
	CompRelease = inputs.Release
	// CompConfig carries the owner's configuration revision.
	CompConfig = inputs.UserConfigs
	// CompRenderer and CompProxyDefaults are pinned management components.
	CompRenderer      = inputs.Renderer
	CompProxyDefaults = inputs.ProxyDefaults
	// CompPullSecret is a fresh management component.
	CompPullSecret = inputs.PullSecret
)

// fragment is a valid Ignition fragment carrying one value for one
// component: a file /etc/sim/<component> whose content is the value.
func fragment(c inputs.Component, value string) []byte {
	return []byte(fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/sim/%s","contents":{"source":"data:,%s"}}]}}`, c.Name(), value))
}

// fragmentValue reads the value back from a fragment made by fragment.
func fragmentValue(f []byte) string {
	s := string(f)
	i := strings.Index(s, "data:,")
	if i < 0 {
		return ""
	}
	s = s[i+len("data:,"):]
	if j := strings.IndexByte(s, '"'); j >= 0 {
		s = s[:j]
	}
	return s
}

// Inputs are what a pool's payload is rendered from: the owner's part
// (Config, Version) and the platform's (one value per management
// component the model varies).
type Inputs struct {
	Config, Version string
	// Platform holds the values of CompRenderer, CompProxyDefaults and
	// CompPullSecret (missing: "0").
	Platform map[inputs.Component]string
}

func (in Inputs) value(c inputs.Component) string {
	switch c {
	case CompRelease:
		return in.Version
	case CompConfig:
		return in.Config
	}
	if v, ok := in.Platform[c]; ok {
		return v
	}
	return "0"
}

// render is the latest payload and hashes of a pool's inputs.
func render(pool string, in Inputs) (*payload.Payload, payload.Hashes) {
	frags := map[inputs.Component][]byte{}
	for _, c := range inputs.Components() {
		frags[c] = fragment(c, in.value(c))
	}
	pl := payload.Uncomposed(pool, frags)
	sum := func(parts ...string) string {
		h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
		return hex.EncodeToString(h[:])
	}
	h := payload.Hashes{
		Rollout:               sum("rollout", pool, in.Config, in.Version),
		RolloutWithoutVersion: sum("rollout-without-version", pool, in.Config),
		Payload:               pl.Hash,
	}
	return pl, h
}

// Values are the component values a payload carries ("component=value"),
// sorted: what the bad-payload knob matches.
func Values(p *payload.Payload) []string {
	var out []string
	for c, f := range p.Fragments {
		out = append(out, c.Name()+"="+fragmentValue(f))
	}
	sort.Strings(out)
	return out
}

// Short is the short form of a payload hash used in traces.
func Short(hash string) string {
	if len(hash) > 6 {
		return hash[:6]
	}
	return hash
}
