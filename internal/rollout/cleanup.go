package rollout

import (
	"sort"

	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// planCleanup lists the Secrets to delete. Cleanup is by reference, never by
// recomputing a hash: a user-data Secret goes only
// when no MachineDeployment, MachineSet or Machine uses it, it is not the
// target or the running one, and the grace period has passed since it was
// first found unused (a mark on the Secret records when). Its token goes with it; a payload goes when no kept token serves it,
// no kept user-data started with it and no node runs it.
func planCleanup(in Input, target, running *UserData, p *Plan) {
	keepUD := map[string]bool{}
	for name := range in.Referenced {
		keepUD[name] = true
	}
	for _, u := range []*UserData{target, running} {
		if u != nil {
			keepUD[u.Name] = true
		}
	}
	keepPayload := map[string]bool{}
	keepToken := map[string]bool{}
	for _, a := range p.Tokens {
		keepToken[a.Name] = true
		keepPayload[a.PayloadHash] = true
	}
	for _, pl := range p.Payloads {
		keepPayload[pl.Hash] = true
	}
	// The payload before a forced rollout is kept while it is the one a
	// halt returns new machines to; so is every payload a node runs.
	if f := forcedFrom(in, target); f != "" {
		keepPayload[f] = true
	}
	for _, n := range NodeCounts(in) {
		for hash := range in.Payloads {
			if n.Payload != "" && payload.PayloadLabelValue(hash) == n.Payload {
				keepPayload[hash] = true
			}
		}
	}
	var del []string
	for _, name := range sortedKeys(in.UserData) {
		ud := in.UserData[name]
		tokenName := secrets.TokenSecretName(in.Pool.Name, ud.RolloutHash)
		keep := keepUD[name]
		switch {
		case keep && ud.UnreferencedSince != nil:
			p.MarkReferenced = append(p.MarkReferenced, name)
		case keep:
		case ud.UnreferencedSince == nil && in.Settings.CleanupGracePeriod > 0:
			p.MarkUnreferenced = append(p.MarkUnreferenced, name)
			keep = true
		case ud.UnreferencedSince != nil && in.Now.Before(ud.UnreferencedSince.Add(in.Settings.CleanupGracePeriod)):
			keep = true
		}
		if keep {
			keepToken[tokenName] = true
			keepPayload[ud.PayloadHash] = true
			if t, ok := in.Tokens[tokenName]; ok {
				keepPayload[t.PayloadHash] = true
			}
			continue
		}
		del = append(del, name)
	}
	for _, name := range sortedKeys(in.Tokens) {
		t := in.Tokens[name]
		if keepToken[name] {
			keepPayload[t.PayloadHash] = true
			continue
		}
		if in.Now.Before(t.Created.Add(in.Settings.CleanupGracePeriod)) {
			keepPayload[t.PayloadHash] = true
			continue
		}
		del = append(del, name)
	}
	for _, hash := range sortedKeys(in.Payloads) {
		if !keepPayload[hash] {
			del = append(del, secrets.PayloadSecretName(in.Pool.Name, hash))
		}
	}
	p.Delete = del
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
