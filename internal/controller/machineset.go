package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// desiredMachineSet sets on ms everything the controller owns for an
// InPlace pool. It carries the pool label but not Cluster API's deployment
// label (Cluster API would look for a MachineDeployment). Its template is
// what new machines boot; existing machines are updated in place and keep
// their own bootstrap data until their node finishes the update. A forced
// rollout's time is kept in an annotation (the MachineDeployment's
// spec.rollout.after of Replace pools).
func desiredMachineSet(ms *clusterv1.MachineSet, pool *nodepoolv1.NodePool, d rollout.Decision, target *rollout.MachineDeploymentTarget) {
	labels := map[string]string{clusterv1.ClusterNameLabel: pool.Spec.ClusterName, nodepoolv1.LabelPool: pool.Name}
	ms.Namespace, ms.Name = pool.Namespace, pool.Name
	if ms.Labels == nil {
		ms.Labels = map[string]string{}
	}
	if ms.Annotations == nil {
		ms.Annotations = map[string]string{}
	}
	for k, v := range labels {
		ms.Labels[k] = v
	}
	ms.Spec.ClusterName = pool.Spec.ClusterName
	ms.Spec.Replicas = decidedReplicas(ms.Annotations, d)
	ms.Spec.Selector = metav1.LabelSelector{MatchLabels: labels}
	if ms.Spec.Template.Labels == nil {
		ms.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range labels {
		ms.Spec.Template.Labels[k] = v
	}
	if target != nil && target.RolloutAfter != nil {
		ms.Annotations[nodepoolv1.AnnotationInPlaceRolloutAfter] = target.RolloutAfter.UTC().Format(time.RFC3339)
	}
	if target != nil {
		delete(ms.Annotations, clusterv1.PausedAnnotation) // never the controller's on a MachineSet
	}
	desiredMachineSpec(&ms.Spec.Template.Spec, pool, target)
}

func (r *Reconciler) applyMachineSet(ctx context.Context, pool *nodepoolv1.NodePool, w *world, d rollout.Decision, target *rollout.MachineDeploymentTarget) error {
	wrote := "" // the forced rollout time written
	set := func(ms *clusterv1.MachineSet) {
		desiredMachineSet(ms, pool, d, target)
		// A forced rollout time written outside the pool goes back to the
		// controller's (external.go).
		if w.external.restores(inPlaceRolloutAfterKnob) && (target == nil || target.RolloutAfter == nil) {
			delete(ms.Annotations, nodepoolv1.AnnotationInPlaceRolloutAfter)
		}
		wrote = forcedTime(ms)
	}
	replicas := func(ms *clusterv1.MachineSet) *int32 { return ms.Spec.Replicas }
	patched, err := createOrPatch(ctx, r, pool, w.InPlaceSet, &clusterv1.MachineSet{}, set, replicas, d, target, "MachineSet") // apply.go
	if err == nil && patched {
		r.ownForced.Store(pool.UID, wrote)
	}
	return err
}
