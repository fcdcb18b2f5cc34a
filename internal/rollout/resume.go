package rollout

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Resume is what `kubectl nodepool rollout resume` asks of a pool: its pause
// ends, and, when the pool's current rollout is halted (its health gate or a
// drain, as status.rollout says), a resume request names that rollout
// (AnnotationResume, its revision), which the controller carries out on
// the rollout's record (record.go). It changes the pool in place and
// returns what it ends, nothing when the pool is neither paused nor halted.
func Resume(p *nodepoolv1.NodePool) []string {
	var ended []string
	if v := p.Spec.Management.PausedUntil; v != "" && v != "false" {
		p.Spec.Management.PausedUntil = ""
		ended = append(ended, "pause")
	}
	r := p.Status.Rollout
	if r == nil || r.Revision == 0 {
		return ended
	}
	if r.Phase != nodepoolv1.RolloutPhaseHalted {
		return ended
	}
	halt := "health halt"
	if c := meta.FindStatusCondition(p.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); c != nil && c.Reason == nodepoolv1.ReasonDrainHalted {
		halt = "drain halt"
	}
	want := strconv.FormatInt(r.Revision, 10)
	if p.Annotations[nodepoolv1.AnnotationResume] == want {
		return ended // asked already
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[nodepoolv1.AnnotationResume] = want
	return append(ended, halt)
}
