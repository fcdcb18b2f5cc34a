package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/secrets"
)

// owner is the engine's reading of the owner's intent: the user-data the
// MachineDeployment should point at and whether that starts a rollout.
type owner struct {
	// current is what the MachineDeployment points at now; target what it
	// points at after this reconcile.
	current, target *UserData
	// started: the owner's change starts rolling now.
	started bool
	// deferred: an owner change waits for the pause to end.
	deferred bool
	// held: the user-data the MachineDeployment references is gone and
	// could not be rebuilt (planBootstrapData says so).
	held bool
}

// decideOwner reads the owner's intent. A rollout starts when the rollout
// hash of the current inputs differs from the one the MachineDeployment
// points at and the pool is not paused. A render error or a pause keeps
// the current target, so nothing running is disturbed and scaling still
// works.
func decideOwner(in Input, pause poolmath.Pause) owner {
	o := owner{current: currentTarget(in)}
	current := o.current
	if md := in.MachineDeployment; current == nil && md != nil && md.DataSecretName != "" {
		// Leave the MachineDeployment as it is rather than take this for
		// a new pool.
		o.held = true
		return o
	}
	if current == nil && in.MachineDeployment == nil {
		if last := lastTarget(in); last != nil && (pause.Paused || in.RenderErr != nil || in.Latest == nil) {
			// The MachineDeployment was deleted: recreate it on what the
			// machines ran; a pause still holds the owner's change.
			o.target = last
			return o
		}
	}
	o.target = current
	if in.RenderErr != nil || in.Latest == nil || (current != nil && current.RolloutHash == in.Hashes.Rollout) {
		return o
	}
	if current != nil && rollbackHolds(in) {
		return o // the health gate rolled this rollout back (health.go)
	}
	if current != nil && pause.Paused {
		o.deferred = true
		return o
	}
	next := &UserData{
		Name:                  secrets.UserDataSecretName(in.Pool.Name, in.Hashes.Rollout),
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
	o.target, o.started = next, true
	return o
}

// ownerEvents says what the owner's change does.
func ownerEvents(in Input, o owner, pause poolmath.Pause, p *Plan) {
	switch {
	case o.deferred && pause.Paused && saidPaused(in): // said when the pause began holding it
	case o.deferred && pause.Paused: // else a maintenance window holds it (planWindow)
		when := "when spec.management.pausedUntil is cleared"
		if !pause.Until.IsZero() {
			when = "at " + pause.Until.UTC().Format(time.RFC3339)
		}
		msg := "the pool is paused: the pending rollout starts " + when
		if pause.Invalid {
			msg = pause.InvalidText() + ": the pending rollout starts when it is corrected or cleared"
		}
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutDeferred, Message: msg})
	case o.started && o.current != nil:
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutStarted,
			Message: fmt.Sprintf("rolling out %s: machines move from %s to %s", describeRollout(o.current, o.target), o.current.Name, o.target.Name)})
	}
}

// saidPaused reports whether the pool's status already says that a pause
// holds a rollout (UpdatingConfig or UpdatingVersion reason Paused): its
// RolloutDeferred event is said once, when the hold begins, not at every
// look.
func saidPaused(in Input) bool {
	for _, t := range []string{nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ConditionUpdatingVersion} {
		if c := meta.FindStatusCondition(in.Pool.Status.Conditions, t); c != nil && c.Reason == nodepoolv1.ReasonPaused {
			return true
		}
	}
	return false
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
