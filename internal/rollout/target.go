package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
)

// decideTarget returns the user-data the MachineDeployment should point at
// and whether that starts a rollout. A rollout starts when the rollout hash
// of the current inputs differs from the one the MachineDeployment points
// at and the pool is not paused. A render error or a pause keeps the
// current target, so nothing running is disturbed and scaling still works.
func decideTarget(in Input, running *UserData, p *Plan) (*UserData, bool) {
	current := currentTarget(in)
	if in.RenderErr != nil || in.Latest == nil {
		return current, false
	}
	if current != nil && current.RolloutHash == in.Hashes.Rollout {
		return current, false
	}
	if current != nil {
		if until, paused := pausedUntil(in.Pool, in.Now); paused {
			when := "until spec.management.pausedUntil is cleared"
			if !until.IsZero() {
				when = "at " + until.UTC().Format(time.RFC3339)
			}
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: "RolloutDeferred",
				Message: "the pool is paused: the pending rollout starts " + when})
			return current, false
		}
	}
	next := &UserData{
		Name:                  payload.UserDataSecretName(in.Pool.Name, in.Hashes.Rollout),
		RolloutHash:           in.Hashes.Rollout,
		RolloutWithoutVersion: in.Hashes.RolloutWithoutVersion,
		Version:               in.Pool.Spec.Release.Version,
		PayloadHash:           in.Latest.Hash,
		TemplateName:          in.TemplateName,
		Created:               in.Now,
	}
	if existing, ok := in.UserData[next.Name]; ok {
		// Going back to an earlier rollout hash reuses its Secrets.
		next = &existing
	}
	if current != nil {
		what := describeRollout(current, next)
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: "RolloutStarted",
			Message: fmt.Sprintf("rolling out %s: machines move from %s to %s", what, current.Name, next.Name)})
	}
	return next, true
}

// currentTarget is the user-data the MachineDeployment points at now.
func currentTarget(in Input) *UserData {
	if in.MachineDeployment == nil {
		return nil
	}
	ud, ok := in.UserData[in.MachineDeployment.DataSecretName]
	if !ok {
		return nil
	}
	return &ud
}

func describeRollout(from, to *UserData) string {
	switch {
	case from.Version != to.Version && from.RolloutWithoutVersion != to.RolloutWithoutVersion:
		return fmt.Sprintf("a new configuration and version %s", to.Version)
	case from.Version != to.Version:
		return "version " + to.Version
	default:
		return "a new configuration"
	}
}

// pausedUntil reports whether the pool is paused now, and until when (zero
// for "true", paused until someone unpauses it). An unparsable value
// cannot pass API validation and counts as not paused.
func pausedUntil(pool *nodepoolv1.NodePool, now time.Time) (time.Time, bool) {
	v := pool.Spec.Management.PausedUntil
	switch v {
	case "", "false":
		return time.Time{}, false
	case "true":
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || !now.Before(t) {
		return time.Time{}, false
	}
	return t, true
}
