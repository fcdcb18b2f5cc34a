package rollout

import (
	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// RequestAnnotations are the pool annotations a person writes (with
// `kubectl nodepool rollout apply-pending|restart --outside-windows|resume`,
// or by hand) that the controller, the fleet rollout controller and the
// plugin also remove or rewrite. A write decides on the pool as it read it; a newer value
// written since must survive, so a patch that removes or rewrites one of
// them is conditional on the version read (RewritesRequest).
var RequestAnnotations = []string{
	nodepoolv1.AnnotationApplyPending,
	nodepoolv1.AnnotationFleetRollout,
	nodepoolv1.AnnotationOutsideWindowsAt,
	nodepoolv1.AnnotationOutsideWindowsReason,
	nodepoolv1.AnnotationResume,
}

// RewritesRequest reports whether going from before to after removes or
// rewrites a request annotation before had.
func RewritesRequest(before, after *nodepoolv1.NodePool) bool {
	for _, k := range RequestAnnotations {
		was, had := before.Annotations[k]
		if now, has := after.Annotations[k]; had && (!has || now != was) {
			return true
		}
	}
	return false
}
