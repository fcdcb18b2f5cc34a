package cli

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/rollout"
)

// healthFailed makes a rollout the health gate stopped Failed (Halted: no
// further machine is replaced until the pool changes or the rollout is
// resumed; RolledBack: the
// pool returned to the previous revision), from the RolloutHealthy
// condition the controller wrote. It reports whether it did.
func healthFailed(st *RolloutStatus, pool *nodepoolv1.NodePool, d rollout.Decision) bool {
	c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
	phase := rollout.HealthPhaseOf(c) // the engine's reading of its condition
	if phase == rollout.HealthIdle || pool.Spec.Management.Health == nil {
		return false
	}
	st.Health = string(phase)
	if d.Health != nil && d.Health.Phase != rollout.HealthIdle && phase != rollout.HealthRollingBack {
		st.Health = string(d.Health.Phase)
	}
	if phase == rollout.HealthRollingBack {
		return false // rolling back is a rollout in progress
	}
	st.Phase, st.Message = PhaseFailed, fmt.Sprintf("%s (%s): %s", nodepoolv1.ConditionRolloutHealthy, c.Reason, c.Message)
	return true
}

// healthNote adds the health gate's phase to the message of a rollout in
// progress: the canary, a soak and when it ends, or the rollback.
func healthNote(st *RolloutStatus, d rollout.Decision, now time.Time) {
	h := d.Health
	if h == nil || h.Phase == rollout.HealthIdle {
		return
	}
	st.Health = string(h.Phase)
	note := ""
	switch h.Phase {
	case rollout.HealthCanary:
		note = fmt.Sprintf("canary: %d of %d machines passed their soak of %s", min(h.Passed, h.Settings.Canary), h.Settings.Canary, h.Settings.CanarySoak)
	case rollout.HealthSoaking:
		note = fmt.Sprintf("soaking %v, %s left", h.Soaking, max(h.SoakEnds.Sub(now), 0).Round(time.Second))
	case rollout.HealthRolling:
		note = fmt.Sprintf("the canary passed; %d machines on the new payload passed their soak", h.Passed)
	case rollout.HealthRollingBack:
		note = "rolling back to the previous revision"
	}
	if h.Phase == rollout.HealthCanary && len(h.Soaking) > 0 {
		note += fmt.Sprintf(", %s left", max(h.SoakEnds.Sub(now), 0).Round(time.Second))
	}
	if note != "" {
		st.Message = note + "; " + st.Message
	}
}

// rolloutUnhealthy names the pool's halt (the reason RolloutHealthy
// gives), "" when its standing is not Halted or RollingBack.
func rolloutUnhealthy(pool *nodepoolv1.NodePool) string {
	if h := fleet.Halt(pool); h != nil { // as a fleet rollout reads it: from the standing
		return h.Reason
	}
	return ""
}

// updatingCell is the fleet's UPDATING cell: what rolls, and why the
// health gate stopped it.
func updatingCell(r FleetRow) string {
	switch {
	case r.RolloutUnhealthy != "" && r.Updating != "":
		return r.Updating + " (" + r.RolloutUnhealthy + ")"
	case r.RolloutUnhealthy != "":
		return r.RolloutUnhealthy
	}
	return or(r.Updating, "-")
}
