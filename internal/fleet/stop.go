package fleet

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// halted applies the stop conditions: a halt is kept until
// spec.resumedAt is after it; a stop condition that holds halts now.
func (d *decider) halted() bool {
	st := d.st()
	if st.HaltedAt != nil {
		if r := d.in.Spec.ResumedAt; r == nil || !r.After(st.HaltedAt.Time) {
			st.Phase = nodepoolv1.FleetPhaseHalted
			return true
		}
		st.HaltedAt = nil
		d.event(corev1.EventTypeNormal, nodepoolv1.EventFleetRolloutResumed, "resumed at %s", d.in.Spec.ResumedAt.UTC().Format(time.RFC3339))
	}
	why := d.stopReason()
	if why == "" {
		return false
	}
	st.HaltedAt, st.Phase = d.now(), nodepoolv1.FleetPhaseHalted
	st.Message = "halted: " + why + "; no further pool is triggered until `kubectl nodepool fleet rollout resume`"
	d.event(corev1.EventTypeWarning, nodepoolv1.EventFleetRolloutHalted, "%s", st.Message)
	return true
}

// stopReason names the stop condition that holds, "" when none does.
func (d *decider) stopReason() string {
	var failed, unhealthy []string
	for _, p := range d.pools {
		switch p.State {
		case nodepoolv1.FleetPoolFailed:
			failed = append(failed, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, p.Message))
			unhealthy = append(unhealthy, p.Namespace+"/"+p.Name)
		case nodepoolv1.FleetPoolDone:
			obs, ok := d.in.Pools[RefOf(p)]
			if ok && obs.Exists && p.TriggeredAt != nil && obs.Unhealthy != nil && obs.Unhealthy.Reason == nodepoolv1.ReasonDrainHalted {
				// Its machines were replaced, but an old node's drain
				// halted the rollout afterwards: it failed as a health
				// gate's halt does.
				failed = append(failed, fmt.Sprintf("%s/%s: RolloutHealthy is False (%s): %s", p.Namespace, p.Name, obs.Unhealthy.Reason, obs.Unhealthy.Message))
				unhealthy = append(unhealthy, p.Namespace+"/"+p.Name)
			} else if ok && obs.Exists && p.TriggeredAt != nil && !obs.Ready {
				unhealthy = append(unhealthy, p.Namespace+"/"+p.Name)
			}
		}
	}
	if stopOnFailure(d.in.Spec) && len(failed) > 0 {
		return fmt.Sprintf("the rollout of %s", strings.Join(first(failed, 5), "; "))
	}
	if m := d.in.Spec.StopOn.MaxUnhealthyPools; m != nil && len(unhealthy) > int(*m) {
		return fmt.Sprintf("%d pools are unhealthy, more than stopOn.maxUnhealthyPools (%d): %s", len(unhealthy), *m, strings.Join(first(unhealthy, 10), ", "))
	}
	return ""
}

func stopOnFailure(s nodepoolv1.FleetRolloutSpec) bool {
	return s.StopOn.RolloutUnhealthy == nil || *s.StopOn.RolloutUnhealthy
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
