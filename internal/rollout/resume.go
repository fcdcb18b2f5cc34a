package rollout

import (
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Resume is what `kubectl nodepool rollout resume` asks of a pool: its pause
// ends and a halted health-gated rollout goes on (the recorded halt is
// removed). It changes the pool in place and returns what it ended, nothing
// when the pool was neither paused nor halted.
func Resume(p *nodepoolv1.NodePool) []string {
	var ended []string
	if v := p.Spec.Management.PausedUntil; v != "" && v != "false" {
		p.Spec.Management.PausedUntil = ""
		ended = append(ended, "pause")
	}
	if _, ok := p.Annotations[nodepoolv1.AnnotationHalted]; ok {
		delete(p.Annotations, nodepoolv1.AnnotationHalted)
		ended = append(ended, "health halt")
	}
	if v, ok := p.Annotations[nodepoolv1.AnnotationDrainHalted]; ok && !strings.HasSuffix(v, drainResumed) {
		// Kept, marked resumed: the drain that halted it is excused, so it
		// does not halt the rollout again at once (drain.go).
		p.Annotations[nodepoolv1.AnnotationDrainHalted] = v + drainResumed
		ended = append(ended, "drain halt")
	}
	return ended
}
