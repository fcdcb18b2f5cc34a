package rollout

import (
	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// tokenPointer decides which payload the target's token serves, that is
// what a new or replacement machine boots:
//   - a rollout that starts boots the latest payload;
//   - a rollout in progress keeps the payload it started with, whatever
//     the platform changes meanwhile, except its fresh components (a
//     rotated pull secret, a new trust bundle), which are always current:
//     a stale credential can stop a machine from booting at all;
//   - a settled pool follows spec.management.managementUpdates: NewNodes
//     and Rollout serve the latest payload (Rollout then rolls the drift
//     through a forced rollout); OnNextRollout serves the running nodes'
//     pinned components plus the current fresh ones.
//
// A forced rollout that starts also serves the latest payload: it applies
// the pending management drift.
func tokenPointer(in Input, target, running *UserData, started, forced bool, p *Plan) string {
	tokenName := secrets.TokenSecretName(in.Pool.Name, target.RolloutHash)
	current := ""
	if t, ok := in.Tokens[tokenName]; ok {
		current = t.PayloadHash
	}
	if in.Latest == nil {
		if current == "" {
			return target.PayloadHash
		}
		return current
	}
	// A rollout that starts serves the latest payload even when its token
	// is left from an earlier rollout of the same configuration (one
	// superseded or failed, with the platform of then): its record names
	// the latest (seed 8994942: a configuration applied again after its
	// undo booted the payload that had failed).
	if started || forced {
		store(in, in.Latest, p)
		return in.Latest.Hash
	}
	if !onTarget(in.MachineDeployment, running, target) {
		if current == "" {
			current = target.PayloadHash
		}
		if resumed := resumedPayload(in, target, running, current); resumed != "" && haltHolds(in, target) == nil {
			// A halt pointed the token back (health_halt.go); resumed, the
			// rollout goes on with its own payload.
			if resumed == in.Latest.Hash {
				store(in, in.Latest, p)
				return resumed
			}
			current = resumed
		}
		return freshen(in, current, p)
	}
	if pol := in.Pool.Spec.Management.ManagementUpdates; pol == nodepoolv1.ManagementUpdatesNewNodes || pol == nodepoolv1.ManagementUpdatesRollout {
		store(in, in.Latest, p)
		return in.Latest.Hash
	}
	pinned, ok := in.Payloads[target.PayloadHash]
	if !ok {
		// The pinned payload is unknown (never stored, or removed by
		// hand): keep serving what the token serves.
		if current == "" {
			current = target.PayloadHash
		}
		return current
	}
	composed, err := payload.ComposePinned(pinned, in.Latest)
	if err != nil {
		return orDefault(current, target.PayloadHash)
	}
	store(in, composed, p)
	return composed.Hash
}

// latestForTarget is the input as the target's token reads it: when the
// pool's inputs render another rollout than the target (an owner change
// held by a pause or a maintenance window, a rollout rolled back), the
// latest payload for the target is its own rollout components with the
// current platform (payload.ComposeRollout). A forced rollout, the
// NewNodes and Rollout policies and a resumed rollout then apply the
// platform's drift, never an owner change that has not started.
func latestForTarget(in Input, target *UserData) Input {
	if target == nil || in.Latest == nil || in.RenderErr != nil || target.RolloutHash == in.Hashes.Rollout {
		return in
	}
	base, ok := in.Payloads[target.PayloadHash]
	if !ok {
		return in
	}
	composed, err := payload.ComposeRollout(base, in.Latest)
	if err != nil {
		return in
	}
	in.Latest = composed
	return in
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// store adds a payload to the plan unless it is stored already.
func store(in Input, pl *payload.Payload, p *Plan) {
	if _, ok := in.Payloads[pl.Hash]; ok {
		return
	}
	for _, q := range p.Payloads {
		if q.Hash == pl.Hash {
			return
		}
	}
	p.Payloads = append(p.Payloads, pl)
}

// planToken makes a token exist, serve pointer, and rotate at half its TTL.
func planToken(in Input, name, rolloutHash, pointer string, p *Plan) {
	t, exists := in.Tokens[name]
	rotate := exists && in.Settings.TokenTTL > 0 && !in.Now.Before(t.RotatedAt.Add(in.Settings.TokenTTL/2))
	if exists && !rotate && t.PayloadHash == pointer {
		p.Tokens = append(p.Tokens, TokenAction{Name: name, RolloutHash: rolloutHash, PayloadHash: pointer})
		return
	}
	p.Tokens = append(p.Tokens, TokenAction{Name: name, RolloutHash: rolloutHash, PayloadHash: pointer, Create: !exists, Rotate: rotate})
}

// freshen returns the payload a new machine of a rollout in progress boots:
// the one its token serves (hash) with the fresh components of the latest
// inputs. It is hash itself when nothing fresh changed, or when hash is not
// stored (nothing to compose from).
func freshen(in Input, hash string, p *Plan) string {
	base, ok := in.Payloads[hash]
	if !ok {
		return hash
	}
	composed, err := payload.ComposePinned(base, in.Latest)
	if err != nil || composed.Hash == hash {
		return hash
	}
	store(in, composed, p)
	return composed.Hash
}
