package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v3_5 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"

	"nodepool.dev/nodepool/internal/inputs"
)

// Payload is what a node of a pool boots, with the parts it was made of.
type Payload struct {
	// Pool is the name of the pool the payload is for.
	Pool string
	// Ignition is the merged, validated Ignition config (JSON).
	Ignition []byte
	// Fragments has one Ignition fragment (JSON) per component: what a
	// payload Secret keeps, so a later payload can reuse pinned fragments.
	Fragments map[inputs.Component][]byte
	// Manifest has the digest of each fragment.
	Manifest Manifest
	// Hash is the payload hash, the hex sha256 over the pool name and the
	// manifest. It names what a node boots.
	Hash string
}

// ConflictError says that two components of a payload declare the same
// thing (a file path, a unit, a kernel argument, ...) differently.
type ConflictError struct {
	// Claim is what both declare, such as "path /etc/containers/registries.conf".
	Claim string
	// First and Second are the components. Second is the zero Component
	// when the clash is with the node identity nodepool adds (kubelet
	// labels drop-in and manifest file).
	First, Second inputs.Component
}

func (e *ConflictError) Error() string {
	second := "nodepool's node identity (kubelet labels and " + ManifestPath + ")"
	if e.Second != (inputs.Component{}) {
		second = "component " + e.Second.Name()
	}
	return fmt.Sprintf("component %s and %s both declare %s, differently", e.First, second, e.Claim)
}

// Compose builds the payload a node of pool boots from one fragment per
// component: it refuses conflicts between fragments, merges them with the
// Ignition library (in the order of inputs.Components(), user configs last),
// computes the manifest and the payload hash, adds the node identity (the
// kubelet drop-in with the pool and payload labels, and the manifest file)
// and validates the result with the Ignition library. Equal fragments give
// equal payloads, byte for byte.
//
// It is how the controller makes the payload a new node should boot from
// the pinned fragments of an earlier payload and the fresh ones of the
// current inputs (see ComposePinned), and how it reloads a stored payload.
func Compose(pool string, fragments map[inputs.Component][]byte) (*Payload, error) {
	if err := validatePoolName(pool); err != nil {
		return nil, err
	}
	components := inputs.Components()
	for c := range fragments {
		if !slices.Contains(components, c) {
			return nil, fmt.Errorf("fragment for unknown component %q: compose only the components of inputs.Components()", c)
		}
	}
	p := &Payload{
		Pool:      pool,
		Fragments: make(map[inputs.Component][]byte, len(components)),
		Manifest:  make(Manifest, len(components)),
	}
	parsed := make(map[inputs.Component]igntypes.Config, len(components))
	for _, c := range components {
		raw, ok := fragments[c]
		if !ok {
			return nil, fmt.Errorf("no fragment for component %s: a payload has one fragment per component", c)
		}
		cfg, err := decodeFragment(c, raw)
		if err != nil {
			return nil, err
		}
		parsed[c] = cfg
		p.Fragments[c] = raw
		p.Manifest[c] = Digest(raw)
	}

	merged := emptyConfig()
	owners := map[string]inputs.Component{}
	values := map[string]string{}
	for _, c := range mergeOrder(components) {
		cfg := parsed[c]
		dups := map[string]bool{}
		claims := inputs.Claims(cfg)
		for _, k := range slices.Sorted(maps.Keys(claims)) {
			owner, seen := owners[k]
			switch {
			case !seen:
				owners[k], values[k] = c, claims[k]
			case values[k] == claims[k]:
				dups[k] = true
			default:
				return nil, &ConflictError{Claim: k, First: owner, Second: c}
			}
		}
		merged = v3_5.Merge(merged, inputs.WithoutClaims(cfg, dups))
	}
	p.Hash = payloadHash(pool, p.Manifest)

	identity, err := renderIdentity(pool, p.Hash, p.Manifest)
	if err != nil {
		return nil, err
	}
	for k, v := range inputs.Claims(identity) {
		if owner, seen := owners[k]; seen && values[k] != v {
			return nil, &ConflictError{Claim: k, First: owner}
		}
	}
	merged = v3_5.Merge(merged, identity)
	// One validation of the whole payload with the library covers every
	// fragment; only when it fails are the fragments validated one by one,
	// to name the one at fault.
	if rpt := validate.ValidateWithContext(merged, nil); rpt.IsFatal() {
		for _, c := range components {
			if _, r, err := v3_5.ParseCompatibleVersion(fragments[c]); err != nil {
				return nil, fmt.Errorf("the fragment of component %s is not a valid Ignition config: %s", c, describe(r, err))
			}
		}
		return nil, fmt.Errorf("the merged payload is not a valid Ignition config: %s", describe(rpt, errors.New("invalid")))
	}
	if p.Ignition, err = encode(merged); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeFragment reads a fragment. A fragment of the current Ignition
// version is decoded directly (Compose validates the merged payload); any
// other is parsed, validated and translated by the library.
func decodeFragment(c inputs.Component, raw []byte) (igntypes.Config, error) {
	var cfg igntypes.Config
	if err := json.Unmarshal(raw, &cfg); err == nil && cfg.Ignition.Version == inputs.IgnitionVersion {
		return cfg, nil
	}
	cfg, rpt, err := v3_5.ParseCompatibleVersion(raw)
	if err != nil {
		return igntypes.Config{}, fmt.Errorf("the fragment of component %s is not a valid Ignition config: %s", c, describe(rpt, err))
	}
	return cfg, nil
}

// mergeOrder is the order fragments are merged in: the table's, with the
// owner's configs last. Conflicts are refused and repeats dropped, so the
// order only decides the order of entries in the payload; merging the
// largest fragment last keeps the merge linear in its size.
func mergeOrder(components []inputs.Component) []inputs.Component {
	out := make([]inputs.Component, 0, len(components))
	for _, c := range components {
		if c != inputs.UserConfigs {
			out = append(out, c)
		}
	}
	return append(out, inputs.UserConfigs)
}

// Uncomposed is the payload Compose(pool, fragments) gives, known by its
// fragments, manifest and hash only: Ignition is nil until Compose is
// called. Fragments another pool's Compose accepted need no new check to
// be compared, hashed or pinned; only a payload about to be stored needs
// its Ignition.
func Uncomposed(pool string, fragments map[inputs.Component][]byte) *Payload {
	m := make(Manifest, len(fragments))
	for c, f := range fragments {
		m[c] = Digest(f)
	}
	return &Payload{Pool: pool, Fragments: fragments, Manifest: m, Hash: payloadHash(pool, m)}
}

// ForPool is the uncomposed payload of p's fragments for another pool:
// only the hash is computed again, not the fragments' digests.
func (p *Payload) ForPool(pool string) *Payload {
	return &Payload{Pool: pool, Fragments: p.Fragments, Manifest: p.Manifest, Hash: payloadHash(pool, p.Manifest)}
}

// Composed is p with its Ignition: p itself when it has one, else
// Compose of its fragments, which must give p's hash.
func (p *Payload) Composed() (*Payload, error) {
	if p.Ignition != nil {
		return p, nil
	}
	full, err := Compose(p.Pool, p.Fragments)
	if err != nil {
		return nil, err
	}
	if full.Hash != p.Hash {
		return nil, fmt.Errorf("payload %s composed as %s: this is a bug in nodepool", Short(p.Hash), Short(full.Hash))
	}
	return full, nil
}

// ComposePinned composes what a new node boots while management drift is
// pending (policy OnNextRollout): every component of running (the payload
// the pool's nodes booted), except fresh ones, which come from latest. A
// component running lacks (made by an older nodepool) comes from latest.
func ComposePinned(running, latest *Payload) (*Payload, error) {
	if running.Pool != latest.Pool {
		return nil, fmt.Errorf("cannot compose payloads of pools %q and %q", running.Pool, latest.Pool)
	}
	frags := make(map[inputs.Component][]byte, len(latest.Fragments))
	same := true      // as latest: nothing is pinned
	asRunning := true // as running: nothing fresh changed
	for _, c := range inputs.Components() {
		f, ok := running.Fragments[c]
		if c.IsFresh() || !ok {
			f = latest.Fragments[c]
		}
		frags[c] = f
		same = same && bytes.Equal(f, latest.Fragments[c])
		asRunning = asRunning && ok && bytes.Equal(f, running.Fragments[c])
	}
	// Equal fragments compose an equal payload: the common cases (no
	// drift; management drift only) compose nothing.
	if same && len(latest.Fragments) == len(frags) {
		return latest, nil
	}
	if asRunning && len(running.Fragments) == len(frags) {
		return running, nil
	}
	return pinnedCompositions.compose(latest.Pool, frags)
}

// ComposeRollout composes the latest payload of base's rollout: every
// rollout component of base (the owner's intent a rollout ran), every
// management component of latest (the platform as it is now). After a
// rollback it is what a forced rollout or a new machine boots: the
// rolled-back revision, with the platform current, never the
// configuration that failed.
func ComposeRollout(base, latest *Payload) (*Payload, error) {
	if base.Pool != latest.Pool {
		return nil, fmt.Errorf("cannot compose payloads of pools %q and %q", base.Pool, latest.Pool)
	}
	frags := make(map[inputs.Component][]byte, len(latest.Fragments))
	asLatest := true
	for _, c := range inputs.Components() {
		f, ok := base.Fragments[c]
		if !c.IsRollout() || !ok {
			f = latest.Fragments[c]
		}
		frags[c] = f
		asLatest = asLatest && bytes.Equal(f, latest.Fragments[c])
	}
	if asLatest && len(latest.Fragments) == len(frags) {
		return latest, nil
	}
	return pinnedCompositions.compose(latest.Pool, frags)
}

func describe(rpt report.Report, err error) string {
	var msgs []string
	for _, e := range rpt.Entries {
		if e.Kind.IsFatal() {
			msgs = append(msgs, fmt.Sprintf("%s: %s", e.Context, e.Message))
		}
	}
	if len(msgs) == 0 {
		return err.Error()
	}
	return strings.Join(msgs, "; ")
}

// validatePoolName checks that the pool name can be a node label value.
func validatePoolName(pool string) error {
	if pool == "" {
		return errors.New("the pool name is empty")
	}
	if len(pool) > 63 {
		return fmt.Errorf("pool name %q is longer than 63 characters, so nodes cannot carry it in the %s label: recreate the pool with a shorter name", pool, labelPool)
	}
	return nil
}
