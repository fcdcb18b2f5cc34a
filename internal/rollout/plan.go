package rollout

import (
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// Decide computes the plan for one reconcile of a pool. It is pure: the same
// input always gives the same plan.
func Decide(in Input) Plan {
	p := Plan{Annotations: map[string]string{}}
	pool := in.Pool.Name

	stored := in.UserData
	in = restoreUserData(in, &p)
	running := runningUserData(in)
	seedAnnotations(in, running, &p)

	target, started := decideTarget(in, running, &p)
	if target != nil {
		tokenName := payload.TokenSecretName(pool, target.RolloutHash)
		pointer := tokenPointer(in, target, running, started, &p)
		planToken(in, tokenName, target.RolloutHash, pointer, &p)
		ud := *target
		_, exists := stored[ud.Name]
		p.UserData = append(p.UserData, UserDataAction{UserData: ud, TokenName: tokenName, Create: !exists})
		p.MachineDeployment = &MachineDeploymentTarget{DataSecretName: ud.Name, Version: ud.Version, TemplateName: ud.TemplateName, TemplateKind: ud.TemplateKind}
	}
	// Tokens of older rollouts still used by machines keep rotating, and
	// their user-data keeps carrying their current token.
	for _, name := range sortedKeys(in.UserData) {
		ud := in.UserData[name]
		if target != nil && name == target.Name {
			continue
		}
		tokenName := payload.TokenSecretName(pool, ud.RolloutHash)
		if !in.Referenced[name] {
			continue
		}
		// A token gone from under machines that still use its user-data
		// is made again, serving the payload that rollout started with.
		serves := ud.PayloadHash
		if t, ok := in.Tokens[tokenName]; ok {
			serves = t.PayloadHash
		}
		if serves != "" {
			planToken(in, tokenName, ud.RolloutHash, serves, &p)
			_, exists := stored[name]
			p.UserData = append(p.UserData, UserDataAction{UserData: ud, TokenName: tokenName, Create: !exists})
		}
	}

	repointMissingPayloads(in, &p)

	base := target
	if base == nil {
		base = running
	}
	planDrift(in, base, &p)
	forced := false
	if !started {
		forced = planForce(in, target, p.Pending, &p)
	} else if !recreated(in, target) {
		p.Record = ownerRecord(in, currentTarget(in), target)
	}
	planStatus(in, running, target, forced, &p)
	planBootstrapData(in, &p)
	planInPlace(in, target, &p)
	planCleanup(in, target, running, &p)
	planRequeue(in, &p)
	return p
}

// planRequeue asks to look again before the next token rotation, pause
// expiry or cleanup is due.
func planRequeue(in Input, p *Plan) {
	next := time.Duration(0)
	consider := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, t := range in.Tokens {
		consider(t.RotatedAt.Add(in.Settings.TokenTTL / 2).Sub(in.Now))
	}
	if until, ok := PausedUntil(in.Pool, in.Now); ok && !until.IsZero() {
		consider(until.Sub(in.Now))
	}
	if p.scheduled != nil {
		consider(p.scheduled.at.Sub(in.Now))
	}
	if len(p.Delete) == 0 && in.Settings.CleanupGracePeriod > 0 {
		for name, ud := range in.UserData {
			if in.Referenced[name] {
				continue
			}
			since := in.Now
			if ud.UnreferencedSince != nil {
				since = *ud.UnreferencedSince
			}
			consider(since.Add(in.Settings.CleanupGracePeriod).Sub(in.Now))
		}
	}
	if next > 0 {
		p.RequeueAfter = next + time.Second
	}
}

// annotation reads a pool annotation, "" when unset.
func annotation(pool *nodepoolv1.NodePool, key string) string {
	if pool.Annotations == nil {
		return ""
	}
	return pool.Annotations[key]
}

// ownerRecord describes a rollout the owner started (or the first one of a
// new pool): initiator version when only the release version changed.
func ownerRecord(in Input, from, to *UserData) *Record {
	r := &Record{Initiator: InitiatorSpec, RolloutHash: to.RolloutHash, PayloadHash: in.Latest.Hash, Started: in.Now}
	if from != nil && from.RolloutWithoutVersion == to.RolloutWithoutVersion && from.Version != to.Version {
		r.Initiator = InitiatorVersion
	}
	if from != nil {
		if old, ok := in.Payloads[from.PayloadHash]; ok {
			for _, ch := range payload.Diff(old.Manifest, in.Latest.Manifest) {
				r.Changed = append(r.Changed, ch.Component.Name())
			}
		}
	} else {
		for _, c := range inputs.Components() {
			r.Changed = append(r.Changed, c.Name())
		}
	}
	return r
}
