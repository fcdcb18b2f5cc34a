package sim

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// fetchUpdate makes one attempt at the desired payload of a Node: the
// update Secret, its pointer config, the fetch, the checks a machine makes
// at boot, and that the payload is the desired one. It returns an error only
// when the workload cluster's API server fails; everything else is in the
// outcome.
func (r *agentReconciler) fetchUpdate(ctx context.Context, node *corev1.Node, desired string) (updateOutcome, error) {
	ref := node.Annotations[nodepoolv1.AnnotationUpdateSecret]
	key, err := secrets.ParseUpdateSecretRef(ref)
	if err != nil {
		return degraded("%v", err), nil
	}
	s := &corev1.Secret{}
	if err := r.secrets.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return degraded("update Secret %s does not exist in the workload cluster", ref), nil
		}
		return updateOutcome{}, fmt.Errorf("reading update Secret %s: %w", ref, err)
	}
	pointer, err := secrets.DecodeUpdateSecret(ref, s)
	if err != nil {
		return degraded("%v", err), nil
	}
	body, err := r.fetcher.fetch(ctx, pointer)
	if err != nil {
		return fetchOutcome(err, ref), nil
	}
	if err := pointer.Verify(body); err != nil {
		return degraded("payload from %s (update Secret %s): %v", pointer.URL, ref, err), nil
	}
	booted, err := payload.Inspect(body)
	if err != nil {
		return degraded("payload from %s (update Secret %s): %v", pointer.URL, ref, err), nil
	}
	out := checkPayload(booted, desired, ref)
	if out.booted != nil {
		if out.failAfter, err = failAfter(body); err != nil {
			return degraded("payload from %s (update Secret %s): %v", pointer.URL, ref, err), nil
		}
	}
	return out, nil
}

// reportState writes the agent's state and message on the Node, recording
// or forgetting the start of the update, and says whether it wrote
// anything: an unchanged Node is not written.
func (r *agentReconciler) reportState(ctx context.Context, node *corev1.Node, state, message string, started *string) (bool, error) {
	changes := map[string]*string{
		nodepoolv1.AnnotationUpdateState:   &state,
		nodepoolv1.AnnotationUpdateMessage: nil,
		simv1.AnnotationUpdateStarted:      started,
	}
	if message != "" {
		changes[nodepoolv1.AnnotationUpdateMessage] = &message
	}
	before := node.DeepCopy()
	if !setAnnotations(node, changes) {
		return false, nil
	}
	if err := r.nodes.Patch(ctx, node, client.MergeFrom(before)); err != nil {
		return false, fmt.Errorf("writing update state %s on Node %s: %w", state, node.Name, err)
	}
	return true, nil
}

// apply makes the Node run the fetched payload, in one write: the old
// payload's labels are swapped for the new one's, the current payload is
// the new one and the state Done. The write fails with a conflict if the
// Node changed since it was read (the controller may have asked for
// another payload meanwhile). The SimMachine then records the new labels,
// so a Node registered again gets them.
func (r *agentReconciler) apply(ctx context.Context, sm *simv1.SimMachine, node *corev1.Node, booted *payload.Booted, fail *time.Duration) error {
	// The fail-after marker of the new payload first: by the time the
	// Node says Done (and the controller finishes the update, which
	// wakes the machine reconciler), the SimMachine says when it fails.
	if err := r.recordFailAt(ctx, sm, fail); err != nil {
		return err
	}
	before := node.DeepCopy()
	node.Labels = appliedLabels(node.Labels, sm.Status.NodeLabels, booted.NodeLabels)
	setAnnotations(node, map[string]*string{
		nodepoolv1.AnnotationNodeCurrentPayload: ptr.To(booted.Hash),
		nodepoolv1.AnnotationUpdateState:        ptr.To(nodepoolv1.UpdateStateDone),
		nodepoolv1.AnnotationUpdateMessage:      nil,
		simv1.AnnotationUpdateStarted:           nil,
	})
	if err := r.nodes.Patch(ctx, node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("applying payload %s to Node %s: %w", payload.Short(booted.Hash), node.Name, err)
	}
	if maps.Equal(sm.Status.NodeLabels, booted.NodeLabels) {
		return nil
	}
	// A merge patch of the labels alone: the machine reconciler's patches
	// of the SimMachine carry only what it changes, never these labels.
	smBefore := sm.DeepCopy()
	sm.Status.NodeLabels = maps.Clone(booted.NodeLabels)
	if err := r.client.Status().Patch(ctx, sm, client.MergeFrom(smBefore)); err != nil {
		return fmt.Errorf("recording the node labels of payload %s on SimMachine %s/%s: %w", payload.Short(booted.Hash), sm.Namespace, sm.Name, err)
	}
	return nil
}

// setAnnotations sets the annotations of changes on obj, removing those
// whose value is nil, and says whether anything changed.
func setAnnotations(obj client.Object, changes map[string]*string) bool {
	a := obj.GetAnnotations()
	changed := false
	for k, v := range changes {
		old, had := a[k]
		switch {
		case v == nil && had:
			delete(a, k)
			changed = true
		case v != nil && (!had || old != *v):
			if a == nil {
				a = map[string]string{}
			}
			a[k] = *v
			changed = true
		}
	}
	obj.SetAnnotations(a)
	return changed
}

// recordFailAt records on the SimMachine when the payload it now runs
// makes its Node fail (failmarker.go), or that it never does.
func (r *agentReconciler) recordFailAt(ctx context.Context, sm *simv1.SimMachine, fail *time.Duration) error {
	if fail == nil && sm.Status.FailAt == nil {
		return nil
	}
	smBefore := sm.DeepCopy()
	sm.Status.FailAt = nil
	if fail != nil {
		sm.Status.FailAt = failAtTime(r.now(), *fail)
	}
	if err := r.client.Status().Patch(ctx, sm, client.MergeFrom(smBefore)); err != nil {
		return fmt.Errorf("recording the fail-after marker on SimMachine %s/%s: %w", sm.Namespace, sm.Name, err)
	}
	return nil
}
