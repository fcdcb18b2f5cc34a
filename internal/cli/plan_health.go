package cli

import (
	"fmt"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// PlanHealth is how a health-gated rollout would go: the canary, the
// rounds after it, the soaks, and the least time it takes.
type PlanHealth struct {
	// Canary is how many machines go first; CanaryRounds and LaterRounds
	// are the rounds of at most maxSurge+maxUnavailable machines of the
	// canary and of the rest.
	Canary       int32 `json:"canary"`
	CanaryRounds int32 `json:"canaryRounds"`
	LaterRounds  int32 `json:"laterRounds"`
	// CanarySoak and Soak are how long each machine's node must stay
	// healthy; MinDuration is at least canaryRounds × canarySoak +
	// laterRounds × soak.
	CanarySoak       jsonDuration `json:"canarySoak"`
	Soak             jsonDuration `json:"soak"`
	ProgressDeadline jsonDuration `json:"progressDeadline"`
	MinDuration      jsonDuration `json:"minDuration"`
	FailurePolicy    string       `json:"failurePolicy"`
}

// jsonDuration is a duration as Go prints it, such as 1m30s.
type jsonDuration string

func durationOf(d time.Duration) jsonDuration { return jsonDuration(d.String()) }

// planHealth words how the health gate takes the rollout (nil when it
// does not gate it): the engine's canary, rounds and soaks
// (rollout.Decision.Gated).
func planHealth(r *PlanResult, d rollout.Decision) {
	g := d.Gated()
	if g == nil {
		return
	}
	s := g.Settings
	r.Health = &PlanHealth{Canary: g.Canary, CanaryRounds: g.CanaryRounds, LaterRounds: g.LaterRounds, CanarySoak: durationOf(s.CanarySoak), Soak: durationOf(s.Soak),
		ProgressDeadline: durationOf(s.ProgressDeadline), MinDuration: durationOf(g.MinDuration), FailurePolicy: string(s.Policy)}
}

// healthSentence words the prediction.
func healthSentence(r *PlanResult) string {
	h := r.Health
	if h == nil {
		return ""
	}
	onFail := "the rollout halts"
	if h.FailurePolicy == string(nodepoolv1.FailurePolicyRollback) {
		onFail = "the pool rolls back to the previous revision"
	}
	machines := "machines"
	if h.Canary == 1 {
		machines = "machine"
	}
	return fmt.Sprintf("health-gated: a canary of %d machine(s) in %d round(s), each soaking %s, then %d round(s) each soaking %s: at least %s; "+
		"canary: %d %s, surge held at %d (maxUnavailable 0) until it soaks %s, so no machine beyond it is made on the new payload before; "+
		"a new machine not healthy within %s or a canary unhealthy during its soak and %s (new machines then boot the last healthy payload)",
		h.Canary, h.CanaryRounds, h.CanarySoak, h.LaterRounds, h.Soak, h.MinDuration,
		h.Canary, machines, h.Canary, h.CanarySoak, h.ProgressDeadline, onFail)
}
