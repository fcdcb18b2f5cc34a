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
	if md := in.MachineDeployment; current == nil && md != nil && md.DataSecretName != "" {
		// The user-data the MachineDeployment references is gone and
		// could not be rebuilt: leave the MachineDeployment as it is
		// rather than take this for a new pool (planBootstrapData says so).
		return nil, false
	}
	if current == nil && in.MachineDeployment == nil {
		if last := lastTarget(in); last != nil {
			if _, paused := PausedUntil(in.Pool, in.Now); paused || in.RenderErr != nil || in.Latest == nil {
				// The MachineDeployment was deleted: recreate it on what the
				// machines ran; a pause still holds the owner's change.
				return last, false
			}
		}
	}
	if in.RenderErr != nil || in.Latest == nil {
		return current, false
	}
	if current != nil && current.RolloutHash == in.Hashes.Rollout {
		return current, false
	}
	if current != nil {
		if until, paused := PausedUntil(in.Pool, in.Now); paused {
			when := "when spec.management.pausedUntil is cleared"
			if !until.IsZero() {
				when = "at " + until.UTC().Format(time.RFC3339)
			}
			msg := "the pool is paused: the pending rollout starts " + when
			if invalidPause(in.Pool) {
				msg = invalidPauseText(in.Pool) + ": the pending rollout starts when it is corrected or cleared"
			}
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: "RolloutDeferred", Message: msg})
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
		TemplateKind:          TemplateKindOf(in.Pool.Spec.InfrastructureTemplateRef),
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

// lastTarget is the stored user-data the pool's annotations and status say
// the machines ran, for a pool whose MachineDeployment is gone.
func lastTarget(in Input) *UserData {
	config := annotation(in.Pool, nodepoolv1.AnnotationCurrentRolloutConfig)
	if config == "" {
		return nil
	}
	for _, name := range sortedKeys(in.UserData) {
		if ud := in.UserData[name]; ud.RolloutWithoutVersion == config && ud.Version == in.Pool.Status.Version {
			return &ud
		}
	}
	return nil
}

// recreated reports whether a target without a MachineDeployment is the
// one the machines ran already (the MachineDeployment was deleted and is
// made again): no rollout is recorded for it.
func recreated(in Input, target *UserData) bool {
	if in.MachineDeployment != nil || target == nil {
		return false
	}
	config := annotation(in.Pool, nodepoolv1.AnnotationCurrentRolloutConfig)
	return config != "" && target.RolloutWithoutVersion == config && target.Version == in.Pool.Status.Version
}

// TemplateKindOf is how a user-data Secret records the kind of the
// infrastructure template its machines use: "Kind.group".
func TemplateKindOf(ref nodepoolv1.TemplateReference) string {
	return ref.Kind + "." + ref.APIGroup
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

// PausedUntil reports whether the pool is paused now, and until when (zero
// for "true", paused until someone unpauses it). It fails closed: a value
// that is not a real RFC3339 time (the API refuses one, but an object
// stored before that rule, or restored from a backup, may carry it) holds
// the pool as paused until someone corrects it. The CLI asks the same
// function, so it never says otherwise.
func PausedUntil(pool *nodepoolv1.NodePool, now time.Time) (time.Time, bool) {
	v := pool.Spec.Management.PausedUntil
	switch v {
	case "", "false":
		return time.Time{}, false
	case "true":
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true
	}
	if !now.Before(t) {
		return time.Time{}, false
	}
	return t, true
}

// invalidPause reports whether pausedUntil is set to something that is
// neither a boolean nor a real RFC3339 time.
func invalidPause(pool *nodepoolv1.NodePool) bool {
	switch v := pool.Spec.Management.PausedUntil; v {
	case "", "false", "true":
		return false
	default:
		_, err := time.Parse(time.RFC3339, v)
		return err != nil
	}
}

func invalidPauseText(pool *nodepoolv1.NodePool) string {
	return fmt.Sprintf("spec.management.pausedUntil %q is not an RFC3339 time, so the pool is held as paused", pool.Spec.Management.PausedUntil)
}
