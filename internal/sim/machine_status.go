package sim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/cluster-api/util/conditions"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

const metav1False = metav1.ConditionFalse

// warningReasons are the Booted reasons that mean something is wrong, as
// opposed to a boot that is on its way.
var warningReasons = map[string]bool{
	simv1.ReasonBootFailed:               true,
	simv1.ReasonInvalidUserData:          true,
	simv1.ReasonPayloadServerRefused:     true,
	simv1.ReasonPayloadServerUnreachable: true,
	simv1.ReasonInvalidPayload:           true,
	simv1.ReasonRegisteringNode:          true,
}

// reportBoot records where the boot stands on the Booted condition and on
// Ready (which Cluster API mirrors into the Machine), and says it in an
// Event when the reason changes.
func (r *machineReconciler) reportBoot(sm *simv1.SimMachine, step bootStep) {
	status := metav1.ConditionFalse
	if step.reason == simv1.ReasonBooted {
		status = metav1.ConditionTrue
	}
	previous := conditions.GetReason(sm, simv1.ConditionBooted)
	setBooted(sm, status, step.reason, step.message)
	if previous == step.reason {
		return
	}
	eventType := corev1.EventTypeNormal
	if warningReasons[step.reason] {
		eventType = corev1.EventTypeWarning
	}
	r.recorder.Eventf(sm, nil, eventType, step.reason, "Boot", "%s", step.message)
	if status == metav1.ConditionFalse && !ptr.Deref(sm.Status.Initialization.Provisioned, false) {
		setNodeHealthy(sm, metav1.ConditionFalse, simv1.ReasonNoNode, "the machine has not registered a Node yet")
	}
}

// reportHealth records the Node's health on NodeHealthy, with an Event when
// it changes.
func (r *machineReconciler) reportHealth(sm *simv1.SimMachine, healthy bool, message string) {
	status, reason, eventType := metav1.ConditionTrue, simv1.ReasonNodeReady, corev1.EventTypeNormal
	if !healthy {
		status, reason, eventType = metav1.ConditionFalse, simv1.ReasonNodeUnhealthy, corev1.EventTypeWarning
	}
	// A Node that comes up Ready is told by the Booted Event; a change of
	// health, or a Node that starts unhealthy, gets its own.
	if previous := conditions.GetReason(sm, simv1.ConditionNodeHealthy); previous != reason && (!healthy || previous == simv1.ReasonNodeUnhealthy) {
		r.recorder.Eventf(sm, nil, eventType, reason, "Health", "%s", message)
	}
	setNodeHealthy(sm, status, reason, message)
}

func setBooted(sm *simv1.SimMachine, status metav1.ConditionStatus, reason, message string) {
	for _, t := range []string{simv1.ConditionBooted, simv1.ConditionReady} {
		conditions.Set(sm, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: sm.Generation})
	}
}

func setNodeHealthy(sm *simv1.SimMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(sm, metav1.Condition{Type: simv1.ConditionNodeHealthy, Status: status, Reason: reason, Message: message, ObservedGeneration: sm.Generation})
}
