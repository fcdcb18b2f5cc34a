package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// requestAnnotations are the pool annotations a person writes (with
// `kubectl nodepool rollout apply-pending|restart --outside-windows|resume`,
// or by hand) that the controller also removes or rewrites: the requests
// and the halts a resume ends or marks. A reconcile decides on the pool as
// its cache read it; a person's newer value written since must survive the
// reconcile's patch, so a patch that touches one of them is conditional on
// the version read (a conflict: the next reconcile decides on the pool as
// it is). The fleet rollout controller's release does the same
// (fleetrollout_controller.go poolAnnotations).
var requestAnnotations = []string{
	nodepoolv1.AnnotationApplyPending,
	nodepoolv1.AnnotationFleetRollout,
	nodepoolv1.AnnotationOutsideWindowsAt,
	nodepoolv1.AnnotationOutsideWindowsReason,
	nodepoolv1.AnnotationHalted,
	nodepoolv1.AnnotationDrainHalted,
	nodepoolv1.AnnotationRolledBack,
}

// metadataPatch is the merge patch of a pool's metadata from before to
// after: optimistically locked when it removes or rewrites a request
// annotation before had.
func metadataPatch(before, after *nodepoolv1.NodePool) client.Patch {
	for _, k := range requestAnnotations {
		was, had := before.Annotations[k]
		if now, has := after.Annotations[k]; had && (!has || now != was) {
			return client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		}
	}
	return client.MergeFrom(before)
}
