package observe

import (
	"sort"
	"time"

	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// SummarizeInPlace reduces an InPlace pool's MachineSet and Machines to
// what the engine needs: the MachineSet's template is the target, and what
// a machine runs is its Machine's bootstrap data and version, which the
// controller advances when the machine's node finishes an update. The
// machines are returned for the in-place updater, without their Nodes
// (which live in the workload cluster).
func SummarizeInPlace(pool *nodepoolv1.NodePool, ms *clusterv1.MachineSet, machines []clusterv1.Machine) (*rollout.MachineDeployment, *rollout.InPlace) {
	target := ptr.Deref(ms.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	out := &rollout.MachineDeployment{
		DataSecretName:        target,
		Version:               ms.Spec.Template.Spec.Version,
		RunningDataSecretName: target,
		SpecReplicas:          ms.Spec.Replicas,
		Replicas:              ptr.Deref(ms.Status.Replicas, 0),
		ReadyReplicas:         ptr.Deref(ms.Status.ReadyReplicas, 0),
		TemplateName:          ms.Spec.Template.Spec.InfrastructureRef.Name,
	}
	if v := ms.Annotations[nodepoolv1.AnnotationInPlaceRolloutAfter]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			out.RolloutAfter = &t
		}
	}
	ip := &rollout.InPlace{}
	live := make([]clusterv1.Machine, 0, len(machines))
	for _, m := range machines {
		if m.DeletionTimestamp.IsZero() {
			live = append(live, m)
		}
	}
	// The oldest machine not on the target names what the pool runs while
	// an update is in progress.
	sort.Slice(live, func(i, j int) bool {
		if !live[i].CreationTimestamp.Equal(&live[j].CreationTimestamp) {
			return live[i].CreationTimestamp.Before(&live[j].CreationTimestamp)
		}
		return live[i].Name < live[j].Name
	})
	onTarget := int32(0)
	for _, m := range live {
		im := rollout.InPlaceMachine{
			Machine:        m.Name,
			DataSecretName: MachineUserData(&m),
			Version:        m.Spec.Version,
			UpdatedAt:      UpdatedAt(&m),
		}
		ip.Machines = append(ip.Machines, im)
		out.MachinesCreated = append(out.MachinesCreated, im.UpdatedAt)
		before := out.RolloutAfter != nil && im.UpdatedAt.Before(*out.RolloutAfter)
		if before {
			out.MachinesBeforeRolloutAfter++
		}
		if im.DataSecretName != target || im.Version != out.Version {
			if out.RunningDataSecretName == target && im.DataSecretName != target {
				out.RunningDataSecretName = im.DataSecretName
			}
			continue
		}
		if !before {
			onTarget++
		}
	}
	out.UpToDateReplicas = onTarget
	desired := ptr.Deref(ms.Spec.Replicas, 0)
	out.Complete = ms.Status.ObservedGeneration >= ms.Generation && onTarget == int32(len(live)) && int32(len(live)) == desired
	ip.MaxUnavailable = poolmath.InPlaceMaxUnavailable(pool.Spec.Management.InPlace.MaxUnavailable, desired)
	ip.DrainTimeout = poolmath.Drain(pool).ForceAfter()
	return out, ip
}

// UpdatedAt is when a Machine's node last finished an in-place update, or
// when the Machine was created.
func UpdatedAt(m *clusterv1.Machine) time.Time {
	if v := m.Annotations[nodepoolv1.AnnotationUpdatedAt]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t
		}
	}
	return m.CreationTimestamp.Time
}

// MachineUserData is the user-data a machine of an InPlace pool runs: the
// controller's record, or its bootstrap data until the controller records
// it (Cluster API rewrites the bootstrap data when the template changes).
func MachineUserData(m *clusterv1.Machine) string {
	if v := m.Annotations[nodepoolv1.AnnotationMachineUserData]; v != "" {
		return v
	}
	return ptr.Deref(m.Spec.Bootstrap.DataSecretName, "")
}
