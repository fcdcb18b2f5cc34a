package controller

import (
	"math"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// pausedByDrainHalt is the value of the paused annotation the controller
// sets while a drain halts the rollout: it removes only its own.
const pausedByDrainHalt = "nodepool.dev/drain-halted"

// desiredMachineDeployment sets on md everything the controller owns, with
// every default Cluster API's webhook would set (no webhook runs for us, so
// nothing else defaults it). The template's dataSecretName, version and
// infrastructure reference change only with target; replicas and
// autoscaler bounds are the engine's decision d (Decision.Replicas,
// AutoScaling); strategy and the deletion timeouts follow the spec in
// place (the rolling update's limits are target's while it sets them: a
// health gate's canary on trial).
func desiredMachineDeployment(md *clusterv1.MachineDeployment, pool *nodepoolv1.NodePool, d rollout.Decision, target *rollout.MachineDeploymentTarget) {
	labels := map[string]string{
		clusterv1.ClusterNameLabel:           pool.Spec.ClusterName,
		clusterv1.MachineDeploymentNameLabel: pool.Name,
		nodepoolv1.LabelPool:                 pool.Name,
	}
	md.Namespace, md.Name = pool.Namespace, pool.Name
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	for k, v := range labels {
		md.Labels[k] = v
	}
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Spec.ClusterName = pool.Spec.ClusterName
	// Cluster API's paused annotation is the controller's while a drain
	// halts the rollout, and no one else's: one written outside the pool
	// (where the admission policies are absent) would hold every rollout
	// and scale unseen, so it goes, as spec.paused does (below).
	if target != nil && target.Paused {
		md.Annotations[clusterv1.PausedAnnotation] = pausedByDrainHalt
	} else if target != nil {
		delete(md.Annotations, clusterv1.PausedAnnotation)
	}

	md.Spec.Replicas = decidedReplicas(md.Annotations, d)
	if target != nil && target.Replicas != nil {
		md.Spec.Replicas = ptr.To(*target.Replicas) // a scale-up waits for the canary (rollout.holdScaleUp)
	}

	md.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{
		clusterv1.ClusterNameLabel:           pool.Spec.ClusterName,
		clusterv1.MachineDeploymentNameLabel: pool.Name,
	}}
	if md.Spec.Template.Labels == nil {
		md.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range labels {
		md.Spec.Template.Labels[k] = v
	}

	r := pool.Spec.Management.Replace
	if r.Strategy == nodepoolv1.ReplaceStrategyOnDelete {
		md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{Type: clusterv1.OnDeleteMachineDeploymentStrategyType}
	} else {
		surge, unavailable := r.RollingUpdate.MaxSurge, r.RollingUpdate.MaxUnavailable
		if target != nil && target.MaxSurge != nil && target.MaxUnavailable != nil {
			// The health gate's canary is on trial: the engine's limits
			// hold the rest of its round (rollout.holdSurge).
			surge, unavailable = target.MaxSurge, target.MaxUnavailable
		}
		md.Spec.Rollout.Strategy = clusterv1.MachineDeploymentRolloutStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
				MaxSurge:       ptr.To(ptr.Deref(surge, poolmath.DefaultMaxSurge)),
				MaxUnavailable: ptr.To(ptr.Deref(unavailable, poolmath.DefaultMaxUnavailable)),
			},
		}
	}

	// A pool pauses with spec.management.pausedUntil (`kubectl nodepool
	// rollout pause`), recorded and reported. A paused MachineDeployment
	// (`clusterctl alpha rollout pause` where the admission policy
	// nodepool-owns-machinedeployments is not installed) would hold the
	// pool's next rollout unseen, so the controller resumes it.
	md.Spec.Paused = nil
	if target != nil && target.RolloutAfter != nil {
		md.Spec.Rollout.After = metav1.NewTime(*target.RolloutAfter)
	}
	if target != nil && target.ClearRolloutAfter {
		md.Spec.Rollout.After = metav1.Time{} // a rollback: rollout.planForce
	}
	desiredMachineSpec(&md.Spec.Template.Spec, pool, target)
	md.Spec.Template.Spec.ReadinessGates = healthReadinessGates(pool) // readinessgate.go
}

// decidedReplicas writes the autoscaler bounds annotations the engine
// decided (or removes them) and returns the replicas it decided: the
// controller carries the count out, it does not work it out.
func decidedReplicas(annotations map[string]string, d rollout.Decision) *int32 {
	if a := d.AutoScaling; a != nil {
		annotations[clusterv1.AutoscalerMinSizeAnnotation] = strconv.Itoa(int(a.Min))
		annotations[clusterv1.AutoscalerMaxSizeAnnotation] = strconv.Itoa(int(a.Max))
	} else {
		delete(annotations, clusterv1.AutoscalerMinSizeAnnotation)
		delete(annotations, clusterv1.AutoscalerMaxSizeAnnotation)
	}
	return ptr.To(d.Replicas)
}

// patchFrom is the patch of the pool's MachineDeployment or MachineSet
// from what was read. The autoscaler owns an autoscaled pool's count: when
// the controller changes it (a clamp into new bounds), the patch is
// optimistically locked, so a count the autoscaler wrote after the cached
// read is never overwritten from a stale one (the conflict is retried on a
// fresh read).
func patchFrom(d rollout.Decision, old client.Object, oldReplicas, newReplicas *int32) client.Patch {
	if d.AutoScaling != nil && ptr.Deref(oldReplicas, -1) != ptr.Deref(newReplicas, -1) {
		return client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})
	}
	return client.MergeFrom(old)
}

// timeoutSeconds is a deletion timeout of the machine template: nil (no
// limit) for unset or 0s. The API bounds it to a year; it is clamped
// anyway, so an object stored before that rule can never overflow the
// field.
func timeoutSeconds(d *metav1.Duration) *int32 {
	if d == nil || d.Duration <= 0 {
		return nil
	}
	return ptr.To(int32(min(d.Seconds(), math.MaxInt32)))
}

// desiredMachineSpec sets the machine template: cluster, deletion timeouts
// (drain, volume detach; Cluster API does not roll machines for them),
// and, when there is a target, its bootstrap data, version and
// infrastructure template clone.
func desiredMachineSpec(spec *clusterv1.MachineSpec, pool *nodepoolv1.NodePool, target *rollout.MachineDeploymentTarget) {
	spec.ClusterName = pool.Spec.ClusterName
	// Cluster API forces a drain after nodeDrainTimeout: set only with
	// the drain policy Force (spec.management.drain or spec.nodeDrainTimeout).
	if force := poolmath.Drain(pool).ForceAfter(); force > 0 {
		spec.Deletion.NodeDrainTimeoutSeconds = timeoutSeconds(&metav1.Duration{Duration: force})
	} else {
		spec.Deletion.NodeDrainTimeoutSeconds = nil
	}
	spec.Deletion.NodeVolumeDetachTimeoutSeconds = timeoutSeconds(pool.Spec.NodeVolumeDetachTimeout)
	if target == nil {
		return
	}
	spec.Version = target.Version
	spec.FailureDomain = "" // a pool's machines spread as Cluster API places them; nodepool writes none
	spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: ptr.To(target.DataSecretName)}
	// The infrastructure reference moves only with the target's clone: a
	// changed spec.infrastructureTemplateRef kind or group alone (a held
	// rollout, a template that does not render yet) never rewrites it.
	if target.TemplateName == "" {
		return
	}
	ref := clusterv1.ContractVersionedObjectReference{APIGroup: spec.InfrastructureRef.APIGroup, Kind: spec.InfrastructureRef.Kind, Name: target.TemplateName}
	if kind, group, ok := strings.Cut(target.TemplateKind, "."); ok && kind != "" {
		ref.Kind, ref.APIGroup = kind, group
	} else if ref.Kind == "" {
		ref.Kind, ref.APIGroup = pool.Spec.InfrastructureTemplateRef.Kind, pool.Spec.InfrastructureTemplateRef.APIGroup
	}
	spec.InfrastructureRef = ref
}
