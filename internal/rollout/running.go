package rollout

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// runningUserData is the user-data the pool's machines run: the
// MachineDeployment's once its rollout is complete, the oldest MachineSet's
// while one is in progress. Nil for a new pool, or if that Secret is gone.
func runningUserData(in Input) *UserData {
	md := in.MachineDeployment
	if md == nil {
		return nil
	}
	name := md.RunningDataSecretName
	if name == "" {
		name = md.DataSecretName
	}
	ud, ok := in.UserData[name]
	if !ok {
		return nil
	}
	return &ud
}

// seedAnnotations makes the pool's annotations mirror what the machines
// run. A missing annotation is seeded and a wrong one corrected from the
// running user-data, never from the current inputs: a spec change made
// while the controller was away must still roll out.
func seedAnnotations(in Input, running *UserData, p *Plan) {
	if running == nil {
		return
	}
	// One event per reason for both annotations: two events of the same
	// reason on the same pool at once are one series to the event
	// recorder, which then patches the first (or races its create) for
	// nothing a person reads twice.
	var said []string
	reason := ""
	// A new pool (no annotation yet, no rollout ever complete) records
	// what its first machines run: nothing was lost, nothing is said.
	first := annotation(in.Pool, nodepoolv1.AnnotationCurrentRolloutConfig) == "" && annotation(in.Pool, nodepoolv1.AnnotationCurrentPayload) == "" &&
		in.Pool.Status.Version == ""
	for _, a := range []struct{ key, want string }{
		{nodepoolv1.AnnotationCurrentRolloutConfig, running.RolloutWithoutVersion},
		{nodepoolv1.AnnotationCurrentPayload, running.PayloadHash},
	} {
		got := annotation(in.Pool, a.key)
		if got == a.want || a.want == "" {
			continue
		}
		if a.key == nodepoolv1.AnnotationCurrentPayload && got != "" && forcedInProgress(in.MachineDeployment) {
			// A forced rollout points the user-data at its payload as it
			// starts; the old machines still run the old one until it
			// completes (then the annotation advances, RolloutComplete).
			continue
		}
		p.Annotations[a.key] = a.want
		if got != "" && in.Pool.Status.Updating != "" && in.MachineDeployment.Complete {
			continue // a rollout completed: the annotations advance (event RolloutComplete)
		}
		r, verb := nodepoolv1.EventSeeded, "seeded"
		if got != "" {
			r, verb = nodepoolv1.EventCorrected, "corrected from "+got+" to"
		}
		if reason != "" && r != reason {
			reason = nodepoolv1.EventCorrected // one seeded, one corrected: a correction
		} else {
			reason = r
		}
		said = append(said, fmt.Sprintf("annotation %s %s %s", a.key, verb, a.want))
	}
	if len(said) > 0 && !first {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: reason,
			Message: fmt.Sprintf("%s, from user-data %s that the machines run", strings.Join(said, "; "), running.Name)})
	}
}
