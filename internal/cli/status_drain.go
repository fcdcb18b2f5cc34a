package cli

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// drainFailed makes a rollout a drain halted (spec.management.drain
// onTimeout Halt) Failed, from the RolloutHealthy condition the controller
// wrote; it reports whether it did.
func drainFailed(st *RolloutStatus, pool *nodepoolv1.NodePool) bool {
	c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodepoolv1.ReasonDrainHalted {
		return false
	}
	st.Phase, st.Message = PhaseFailed, fmt.Sprintf("%s (%s): %s", nodepoolv1.ConditionRolloutHealthy, c.Reason, c.Message)
	return true
}

// drainNote adds the nodes being drained to the message: which node, for
// how long, and which pods (and PodDisruptionBudgets) hold it, from
// status.drains.
func drainNote(st *RolloutStatus, pool *nodepoolv1.NodePool, now time.Time) {
	st.Drains = pool.Status.Drains
	if len(st.Drains) == 0 {
		return
	}
	var notes []string
	for _, d := range st.Drains {
		notes = append(notes, drainLine(d, now))
	}
	st.Message = strings.Join(notes, "; ") + "; " + st.Message
}

// drainLine says one node's drain in a line.
func drainLine(d nodepoolv1.NodeDrainStatus, now time.Time) string {
	s := fmt.Sprintf("draining node %s for %s", d.Node, max(now.Sub(d.Since.Time), 0).Round(time.Second))
	if d.Blocked {
		s += " (blocked)"
	}
	var held []string
	for _, p := range d.Pods {
		h := "pod " + p.Pod
		if p.Budget != "" {
			h += " (PodDisruptionBudget " + p.Budget + ")"
		} else if p.Reason != "" {
			h += " (" + p.Reason + ")"
		}
		held = append(held, h)
	}
	if len(held) > 0 {
		s += ", held by " + strings.Join(held, ", ")
	}
	return s
}
