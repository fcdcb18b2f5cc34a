package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// `rollout resume` ends a pause and asks for the end of the current
// rollout's halt.
func TestResumeEndsAPauseAndAHalt(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"other": "kept"}}}
	pool.Spec.Management.PausedUntil = "true"
	pool.Status.Rollout = &nodepoolv1.RolloutStanding{Phase: nodepoolv1.RolloutPhaseHalted, Revision: 7}
	got := rollout.Resume(pool)
	if len(got) != 2 || pool.Spec.Management.PausedUntil != "" || pool.Annotations[nodepoolv1.AnnotationResume] != "7" || pool.Annotations["other"] != "kept" {
		t.Errorf("resumed %v, pausedUntil %q, annotations %v: want the pause ended and revision 7's halt asked to end", got, pool.Spec.Management.PausedUntil, pool.Annotations)
	}
	if got := rollout.Resume(pool); len(got) != 0 {
		t.Errorf("resuming again changes %v, want nothing", got)
	}
}
