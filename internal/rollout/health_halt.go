package rollout

import (
	"slices"
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
)

// A halt is a fact about a rollout, not about one Machine: once a machine
// fails its health gate the pool records the halt (AnnotationHalted), and
// it holds while the pool's target is that rollout, even once auto repair
// or a person deleted the failed machine. It ends when the owner changes
// the pool (a new rollout hash) or a person removes the annotation
// (`kubectl nodepool rollout resume`). While it holds no further machine
// is replaced, and new and replacement machines boot the last healthy
// payload (lastHealthy), never the failing one.

// halt is a halt recorded on the pool.
type halt struct {
	rollout, payload, machine string
}

// value is the annotation's value.
func (h halt) value() string {
	return h.rollout + "/" + h.payload + "/" + h.machine
}

// haltHolds returns the halt recorded for target's rollout, nil when there
// is none (or it is about another rollout).
func haltHolds(in Input, target *UserData) *halt {
	v := recorded(in, nodepoolv1.AnnotationHalted)
	if target == nil || v == "" {
		return nil
	}
	parts := strings.SplitN(v, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	if parts[0] != target.RolloutHash {
		return nil
	}
	return &halt{rollout: parts[0], payload: parts[1], machine: parts[2]}
}

// newHalt is the halt to record for a rollout of target that failed on
// machine: the payload it failed on is what target's token serves.
func newHalt(in Input, target *UserData, machine string) halt {
	return halt{rollout: target.RolloutHash, payload: servedBy(in, target), machine: machine}
}

// servedBy is the payload ud's token serves, or ud's own when its token
// names none.
func servedBy(in Input, ud *UserData) string {
	if t, ok := in.Tokens[secrets.TokenSecretName(in.Pool.Name, ud.RolloutHash)]; ok && t.PayloadHash != "" {
		return t.PayloadHash
	}
	return ud.PayloadHash
}

// forcedFrom is the payload target's token served before the forced
// rollout of target's rollout started (AnnotationForcedFrom), "" when none
// is recorded for it.
func forcedFrom(in Input, target *UserData) string {
	from, _ := forcedPayloads(in, target)
	return from
}

// forcedPayloads are, for the forced rollout of target's rollout on
// record (AnnotationForcedFrom), the payload its token served before and
// the one the forced rollout boots ("" when not recorded: an older
// nodepool wrote only the first).
func forcedPayloads(in Input, target *UserData) (from, to string) {
	parts := strings.SplitN(recorded(in, nodepoolv1.AnnotationForcedFrom), "/", 3)
	if len(parts) < 2 || target == nil || parts[0] != target.RolloutHash {
		return "", ""
	}
	if len(parts) == 3 {
		to = parts[2]
	}
	return parts[1], to
}

// lastHealthy is the payload the machines ran before the rollout of
// target: for an owner change, what the running user-data's token serves;
// for a forced rollout (the user-data keeps its name), what target's
// token served before the force. "" when it is not known or not stored
// (nothing to serve instead).
func lastHealthy(in Input, target, running *UserData) string {
	if target == nil {
		return ""
	}
	// The payload target's rollout failed on: the one its halt recorded,
	// or what its token serves when no halt is recorded yet (the look
	// that finds the failure).
	held, served := haltHolds(in, target), servedBy(in, target)
	failed := served
	if held != nil && held.payload != "" {
		failed = held.payload
	}
	hash := ""
	if running != nil && running.Name != target.Name {
		hash = servedBy(in, running)
	} else {
		hash = forcedFrom(in, target)
		if from, to := forcedPayloads(in, target); to != "" && from == to {
			// The token served the forced payload before the force
			// already (NewNodes, Rollout): what the old nodes run is
			// the last healthy one.
			hash = nodesPayload(in, to)
		}
		if hash == "" && running != nil {
			// Not forced: an owner change applied again onto the user-data
			// whose MachineSet kept machines a halt of its earlier rollout
			// had booted the last healthy payload with (seed 8994942):
			// what the nodes run besides the rollout's own payload, the
			// one that failed. Not besides what the token serves now: once
			// the halt pointed the token at the last healthy payload, that
			// would name the failed one the next look, and the token
			// flipped between the two at every look (seed 8994942 again,
			// when rolling pools were polled less often).
			hash = nodesPayload(in, failed)
		}
	}
	if _, ok := in.Payloads[hash]; ok {
		return hash
	}
	// The nodes that ran it may all be gone (a person deleted the last
	// of them while the others run the failed payload: seed 2671): the
	// halt pointed target's token at it, and the token keeps it.
	if _, ok := in.Payloads[served]; ok && held != nil && served != failed {
		return served
	}
	return ""
}

// rollingBackPayload is, while the health gate rolls a failed rollout
// back, what the machines it makes boot: the payload most of the pool's
// nodes run other than the failed rollout's. A forced rollout's
// rollout.after stays on the MachineDeployment (a forced rollout is never
// undone), so Cluster API replaces the old machines as it rolls back:
// they boot what they ran, never the latest platform the NewNodes and
// Rollout policies serve a settled pool, which no canary tested. "" when
// the pool does not roll back (or a new forced rollout starts).
func rollingBackPayload(in Input, d Decision) string {
	h, failed := d.Health, d.RollbackFrom
	if h == nil || h.Phase != HealthRollingBack || failed == nil || d.Action == ActionForce {
		return ""
	}
	served := failed.PayloadHash
	if t, ok := in.Tokens[secrets.TokenSecretName(in.Pool.Name, failed.RolloutHash)]; ok {
		served = t.PayloadHash
	}
	return nodesPayload(in, failed.PayloadHash, served)
}

// nodesPayload is the stored payload most of the pool's nodes run (by
// their payload label), other than those of not; "" when none.
func nodesPayload(in Input, not ...string) string {
	count := map[string]int32{}
	best := ""
	for _, n := range NodeCounts(in) {
		for _, hash := range sortedKeys(in.Payloads) {
			if slices.Contains(not, hash) || n.Payload == "" || payload.PayloadLabelValue(hash) != n.Payload {
				continue
			}
			count[hash] += n.Count
			if best == "" || count[hash] > count[best] {
				best = hash
			}
		}
	}
	return best
}

// resumedPayload is, for a rollout in progress whose token a halt pointed
// back at the last healthy payload and that a person resumed, the payload
// the rollout goes on with: its own (the owner change's, or the forced
// rollout's on record; the latest when an older nodepool did not record
// it). "" when the token serves anything else, or serves that already (a
// forced rollout of what the token served before: nothing was pointed
// back).
func resumedPayload(in Input, target, running *UserData, current string) string {
	if current == "" || current != lastHealthy(in, target, running) {
		return ""
	}
	if running != nil && running.Name != target.Name {
		if current == target.PayloadHash {
			return ""
		}
		return target.PayloadHash
	}
	md := in.MachineDeployment
	if in.Latest == nil || md == nil || md.RolloutAfter == nil || md.MachinesBeforeRolloutAfter == 0 {
		return ""
	}
	if _, to := forcedPayloads(in, target); to != "" {
		if _, stored := in.Payloads[to]; to == current || !stored {
			return ""
		}
		return to
	}
	return in.Latest.Hash
}

// haltedHealth fills the halt's part of the health state: the machine
// (from the record when the failed machine is gone), the payload new
// machines boot, and the record to write when the halt is new.
func haltedHealth(in Input, h *HealthState, held *halt, target, running *UserData) {
	if held != nil {
		h.recorded = true
		if h.Machine == "" || h.Machine == held.machine {
			h.Machine = held.machine
			if h.Signal == "" {
				h.Signal = "failed its health check"
			}
		}
	} else if target != nil {
		r := newHalt(in, target, h.Machine)
		h.record = r.value()
	}
	if h.Reason == "" {
		h.Reason = nodepoolv1.ReasonRolloutHalted
	}
	h.LastHealthy = lastHealthy(in, target, running)
}
