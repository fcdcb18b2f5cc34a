package observe

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/internal/rollout"
)

// Drains are the nodes Cluster API drains now: the pool's deleting
// Machines whose Deleting condition says DrainingNode, with when the drain
// started and what holds it, as the condition's message says
// (rollout.DrainBlockers reads the pods from it). A drain is UpToDate when
// its machine was on md's template (and not older than its rollout.after):
// a scale-down, a repair or a person's delete, not a rollout's.
func Drains(machines []clusterv1.Machine, md *rollout.MachineDeployment) []rollout.NodeDrain {
	var out []rollout.NodeDrain
	for i := range machines {
		m := &machines[i]
		if m.DeletionTimestamp.IsZero() || m.Status.Deletion == nil || m.Status.Deletion.NodeDrainStartTime.IsZero() || !m.Status.NodeRef.IsDefined() {
			continue
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition)
		if c == nil || c.Reason != clusterv1.MachineDeletingDrainingNodeReason {
			continue
		}
		upToDate := md != nil && ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") == md.DataSecretName && m.Spec.Version == md.Version &&
			(md.RolloutAfter == nil || !m.CreationTimestamp.Time.Before(*md.RolloutAfter))
		out = append(out, rollout.NodeDrain{Machine: m.Name, Node: m.Status.NodeRef.Name, Since: m.Status.Deletion.NodeDrainStartTime.Time,
			Message: c.Message, Pods: rollout.DrainBlockers(c.Message), UpToDate: upToDate})
	}
	return out
}
