package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// metadataPatch is the merge patch of a pool's metadata from before to
// after: optimistically locked when it removes or rewrites a request
// annotation (rollout.RequestAnnotations) before had. A reconcile decides
// on the pool as its cache read it; on a conflict the next reconcile
// decides on the pool as it is. The fleet rollout controller's release
// does the same (fleetrollout_controller.go poolAnnotations), and so does
// the plugin (internal/cli patchPool).
func metadataPatch(before, after *nodepoolv1.NodePool) client.Patch {
	if rollout.RewritesRequest(before, after) {
		return client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	}
	return client.MergeFrom(before)
}
