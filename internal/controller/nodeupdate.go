package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// annotationUpdateSecretWritten on an InPlace pool's MachineSet says the
// update Secret may exist in the workload cluster: set when it is written,
// cleared once it is deleted after the update.
const annotationUpdateSecretWritten = "update.nodepool.dev/secret-written"

// applyNodeActions carries out the in-place steps of the plan on the
// workload cluster's Nodes and the management cluster's Machines. A
// machine is recorded as updated before its Node is uncordoned, so a
// controller restarted in between finishes the Node without updating it
// twice.
func (r *Reconciler) applyNodeActions(ctx context.Context, pool *nodepoolv1.NodePool, w *world, plan rollout.Plan, tok secrets.Token) error {
	if plan.InPlaceTarget == "" {
		return nil
	}
	cluster := client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}
	c, err := r.ClusterCache.GetClient(ctx, cluster)
	if err != nil {
		if len(plan.NodeActions) == 0 {
			return nil
		}
		return fmt.Errorf("reaching the workload cluster to update nodes in place: %w", err)
	}
	written := w.InPlaceSet != nil && w.InPlaceSet.Annotations[annotationUpdateSecretWritten] == "true"
	switch {
	case plan.UpdateInProgress:
		if err := r.ensureUpdateSecret(ctx, c, pool, tok); err != nil {
			return err
		}
		if err := r.markUpdateSecret(ctx, w, true); err != nil {
			return err
		}
	case plan.Complete && written:
		if err := deleteUpdateSecret(ctx, c, r.Settings.NodeUpdateNamespace, pool); err != nil {
			return err
		}
		if err := r.markUpdateSecret(ctx, w, false); err != nil {
			return err
		}
	}
	now := r.now().UTC().Format(time.RFC3339)
	for _, a := range plan.NodeActions {
		node := w.node(a.Node)
		if node == nil {
			continue
		}
		updated := node.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		ann := updated.Annotations
		switch a.Step {
		case rollout.StepDrain:
			if refused := r.drainStep(ctx, pool, a.Node); refused != "" {
				ann[nodepoolv1.AnnotationDrainBlocked] = refused
			} else {
				delete(ann, nodepoolv1.AnnotationDrainBlocked)
			}
			if equality.Semantic.DeepEqual(updated.Annotations, node.Annotations) {
				continue
			}
		case rollout.StepStart:
			updated.Spec.Unschedulable = true
			ann[nodepoolv1.AnnotationUpdatePhase] = nodepoolv1.UpdatePhaseDraining
			ann[nodepoolv1.AnnotationUpdateStartedAt] = now
			if a.Cordoned {
				ann[nodepoolv1.AnnotationWasUnschedulable] = "true"
			}
		case rollout.StepRequest:
			delete(ann, nodepoolv1.AnnotationDrainBlocked)
			ann[nodepoolv1.AnnotationUpdatePhase] = nodepoolv1.UpdatePhaseUpdating
			ann[nodepoolv1.AnnotationDesiredPayload] = a.Payload
			ann[nodepoolv1.AnnotationUpdateSecret] = secrets.UpdateSecretRef(r.Settings.NodeUpdateNamespace, pool)
			ann[nodepoolv1.AnnotationUpdateRequestedAt] = now
		case rollout.StepFinish:
			if err := r.recordMachineUpdated(ctx, w, a, now); err != nil {
				return err
			}
			if a.Uncordon {
				updated.Spec.Unschedulable = false
			}
			delete(ann, nodepoolv1.AnnotationUpdatePhase)
			delete(ann, nodepoolv1.AnnotationUpdateStartedAt)
			delete(ann, nodepoolv1.AnnotationUpdateRequestedAt)
			delete(ann, nodepoolv1.AnnotationWasUnschedulable)
			delete(ann, nodepoolv1.AnnotationDrainBlocked)
		}
		if err := c.Patch(ctx, updated, client.MergeFrom(node)); err != nil {
			return fmt.Errorf("node %s (%s): %w", a.Node, a.Step, err)
		}
		*node = *updated
	}
	return nil
}

// recordMachineUpdated writes on a Machine what its node now runs.
func (r *Reconciler) recordMachineUpdated(ctx context.Context, w *world, a rollout.NodeAction, now string) error {
	for i := range w.Machines {
		m := &w.Machines[i]
		if m.Name != a.Machine {
			continue
		}
		updated := m.DeepCopy()
		updated.Spec.Version = a.Version
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[nodepoolv1.AnnotationMachineUserData] = a.DataSecretName
		updated.Annotations[nodepoolv1.AnnotationUpdatedAt] = now
		if err := r.Client.Patch(ctx, updated, client.MergeFrom(m)); err != nil {
			return fmt.Errorf("recording machine %s as updated: %w", m.Name, err)
		}
		*m = *updated
		return nil
	}
	return nil
}

// ensureUpdateSecret writes the pointer config of the target's current
// token to the workload cluster, where node agents read it.
func (r *Reconciler) ensureUpdateSecret(ctx context.Context, c client.Client, pool *nodepoolv1.NodePool, tok secrets.Token) error {
	if tok.Current == "" {
		return fmt.Errorf("no token for the in-place update of pool %s", pool.Name)
	}
	pointer, err := r.pointer(tok.Current)
	if err != nil {
		return fmt.Errorf("rendering the update pointer config: %w", err)
	}
	key := client.ObjectKey{Namespace: r.Settings.NodeUpdateNamespace, Name: secrets.UpdateSecretName(pool)}
	existing := &corev1.Secret{}
	err = c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, secrets.NewUpdateSecret(key.Namespace, pool, pointer)); err != nil {
			return fmt.Errorf("creating the update Secret %s in the workload cluster: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the update Secret %s in the workload cluster: %w", key, err)
	}
	if secrets.HoldsPointer(existing, pointer) {
		return nil
	}
	updated := existing.DeepCopy()
	secrets.SetPointer(updated, pointer)
	if err := c.Update(ctx, updated); err != nil {
		return fmt.Errorf("updating the update Secret %s in the workload cluster: %w", key, err)
	}
	return nil
}

func (w *world) node(name string) *corev1.Node {
	for i := range w.nodes {
		if w.nodes[i].Name == name {
			return &w.nodes[i]
		}
	}
	return nil
}

// recordMachinesUserData records on each Machine of an InPlace pool that
// has no record yet the user-data it booted: its bootstrap data, before
// the MachineSet's template moves (Cluster API then rewrites it).
func (r *Reconciler) recordMachinesUserData(ctx context.Context, w *world) error {
	for i := range w.Machines {
		m := &w.Machines[i]
		ds := ptr.Deref(m.Spec.Bootstrap.DataSecretName, "")
		if !m.DeletionTimestamp.IsZero() || ds == "" || m.Annotations[nodepoolv1.AnnotationMachineUserData] != "" {
			continue
		}
		updated := m.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[nodepoolv1.AnnotationMachineUserData] = ds
		if err := r.Client.Patch(ctx, updated, client.MergeFrom(m)); err != nil {
			return fmt.Errorf("recording the user-data of machine %s: %w", m.Name, err)
		}
		*m = *updated
	}
	return nil
}

// deleteUpdateSecret deletes the pool's update Secret from the workload
// cluster: no node needs its token between updates.
func deleteUpdateSecret(ctx context.Context, c client.Client, namespace string, pool *nodepoolv1.NodePool) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secrets.UpdateSecretName(pool)}}
	if err := c.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the update Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// deleteUpdateSecret deletes a deleted pool's update Secret, if the
// workload cluster can still be reached (a Cluster going away takes it
// along).
func (r *Reconciler) deleteUpdateSecret(ctx context.Context, pool *nodepoolv1.NodePool) {
	log := r.log(pool)
	c, err := r.ClusterCache.GetClient(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.ClusterName})
	if err != nil {
		log.Info("the workload cluster cannot be reached; its update Secret stays", "reason", err.Error())
		return
	}
	if err := deleteUpdateSecret(ctx, c, r.Settings.NodeUpdateNamespace, pool); err != nil {
		log.Info("the update Secret could not be deleted", "reason", err.Error())
	}
}

// markUpdateSecret records on the MachineSet whether the update Secret may
// exist, so it is deleted once, when the update is over.
func (r *Reconciler) markUpdateSecret(ctx context.Context, w *world, written bool) error {
	if w.InPlaceSet == nil || (w.InPlaceSet.Annotations[annotationUpdateSecretWritten] == "true") == written {
		return nil
	}
	updated := w.InPlaceSet.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	if written {
		updated.Annotations[annotationUpdateSecretWritten] = "true"
	} else {
		delete(updated.Annotations, annotationUpdateSecretWritten)
	}
	if err := r.Client.Patch(ctx, updated, client.MergeFrom(w.InPlaceSet)); err != nil {
		return fmt.Errorf("marking the update Secret on the MachineSet: %w", err)
	}
	w.InPlaceSet = updated
	return nil
}
