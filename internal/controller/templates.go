package controller

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
)

// Infrastructure template clones are named after their content and owned
// by the pool, but Cluster API adds the Cluster as a second owner, so
// garbage collection alone would keep them as long as the Cluster lives.
// They are cleaned up by reference, like the Secrets: a clone goes when
// neither the MachineDeployment (or InPlace MachineSet) nor any of the
// pool's MachineSets uses it, it is not the target or the current inputs'
// clone, and the grace period has passed since it was made.

// cleanupTemplateClones deletes the pool's unreferenced clones of the kind
// the pool references now; keep names clones that must stay whatever
// references them (the target's, the current inputs'). all deletes every
// clone (the pool is being deleted and its machines are gone).
func (r *Reconciler) cleanupTemplateClones(ctx context.Context, pool *nodepoolv1.NodePool, w *world, all bool, keep ...string) error {
	ref := pool.Spec.InfrastructureTemplateRef
	mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return fmt.Errorf("finding the API version of %s.%s: %w", ref.Kind, ref.APIGroup, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(ref.Kind + "List"))
	if err := r.APIReader.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return fmt.Errorf("listing the pool's %s clones: %w", ref.Kind, err)
	}
	used := map[string]bool{}
	for _, name := range keep {
		used[name] = true
	}
	if w != nil {
		if w.MachineDeployment != nil {
			used[w.MachineDeployment.Spec.Template.Spec.InfrastructureRef.Name] = true
		}
		if w.InPlaceSet != nil {
			used[w.InPlaceSet.Spec.Template.Spec.InfrastructureRef.Name] = true
		}
		for i := range w.MachineSets {
			used[w.MachineSets[i].Spec.Template.Spec.InfrastructureRef.Name] = true
		}
	}
	now := r.now()
	for i := range list.Items {
		clone := &list.Items[i]
		if !ownedBy(clone, pool) || (!all && used[clone.GetName()]) {
			continue
		}
		if !all && now.Before(clone.GetCreationTimestamp().Add(r.Settings.CleanupGracePeriod)) {
			continue
		}
		if err := r.Client.Delete(ctx, clone); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting unreferenced %s %s: %w", ref.Kind, clone.GetName(), err)
		}
	}
	return nil
}

// setTemplateSource records on a clone which template, at which
// generation, it was made from, and that template's spec as hashed (see
// inputs.TemplateInput.Pinned): a later read of the same generation is
// the same intent, whatever a provider upgrade makes the API server
// return for it.
func setTemplateSource(clone *unstructured.Unstructured, t inputs.TemplateInput) {
	if t.UID == "" || t.Generation == 0 {
		return
	}
	labels := clone.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[nodepoolv1.LabelTemplateSourceUID] = string(t.UID)
	labels[nodepoolv1.LabelTemplateSourceGeneration] = strconv.FormatInt(t.Generation, 10)
	clone.SetLabels(labels)
	annotations := clone.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[nodepoolv1.AnnotationTemplateSourceSpec] = string(t.Spec)
	clone.SetAnnotations(annotations)
}

// recordTemplateSource adds the source record to a clone made before
// clones carried one. The clone is the current inputs' (its name is
// their spec's hash), so the spec read now is the one it was made from.
//
// A clone whose record names another template UID was made from a
// template since replaced by one of the same content and name: clusterctl
// move creates every object anew (a new UID, generation 1). The record
// moves to the template as it is now, so what a provider upgrade changes
// in it later is pinned again, as before the move.
func (r *Reconciler) recordTemplateSource(ctx context.Context, clone *unstructured.Unstructured, t inputs.TemplateInput) error {
	if uid, ok := clone.GetLabels()[nodepoolv1.LabelTemplateSourceUID]; (ok && uid == string(t.UID)) || t.UID == "" || t.Generation == 0 {
		return nil
	}
	before := clone.DeepCopy()
	setTemplateSource(clone, t)
	if err := r.Client.Patch(ctx, clone, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the source of infrastructure template clone %s: %w", clone.GetName(), err)
	}
	return nil
}
