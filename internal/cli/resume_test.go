package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// `rollout resume` ends a pause and a halted health-gated rollout.
func TestResumeEndsAPauseAndAHalt(t *testing.T) {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		nodepoolv1.AnnotationHalted: "r/p/m1", "other": "kept"}}}
	pool.Spec.Management.PausedUntil = "true"
	got := rollout.Resume(pool)
	if len(got) != 2 || pool.Spec.Management.PausedUntil != "" || pool.Annotations[nodepoolv1.AnnotationHalted] != "" || pool.Annotations["other"] != "kept" {
		t.Errorf("resumed %v, pausedUntil %q, annotations %v: want the pause and the halt ended", got, pool.Spec.Management.PausedUntil, pool.Annotations)
	}
	if got := rollout.Resume(pool); len(got) != 0 {
		t.Errorf("resuming again changes %v, want nothing", got)
	}
}
