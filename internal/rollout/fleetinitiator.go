package rollout

import (
	"strings"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// applyPendingInitiator is who asked for the pool's apply-pending: the
// FleetRollout its fleet-rollout annotation names ("fleetrollout/<name>"),
// else the platform.
func applyPendingInitiator(pool *nodepoolv1.NodePool) Initiator {
	if name := annotation(pool, nodepoolv1.AnnotationFleetRollout); name != "" {
		return Initiator(nodepoolv1.FleetRolloutInitiator(name))
	}
	return InitiatorPlatform
}

// FleetRollout is the name of the FleetRollout that initiated a rollout,
// "" when none did.
func (i Initiator) FleetRollout() string {
	name, ok := strings.CutPrefix(string(i), nodepoolv1.FleetRolloutInitiatorPrefix)
	if !ok {
		return ""
	}
	return name
}

// Platform reports whether the platform asked for the rollout: an
// apply-pending, by hand or by a fleet rollout (rules that hold for
// apply-pending hold for both).
func (i Initiator) Platform() bool { return i == InitiatorPlatform || i.FleetRollout() != "" }
