// Package selection reads which NodePools a FleetRollout selects (its pool
// and namespace selectors) from the API server; the fleet decision
// (package fleet) does no I/O.
package selection

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// Pools lists the pools the selectors match, in the namespaces the
// namespace selector matches (pools being deleted left out).
func Pools(ctx context.Context, reader client.Reader, fr *nodepoolv1.FleetRollout) ([]fleet.Ref, error) {
	poolSel, err := selector(fr.Spec.PoolSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.poolSelector: %w", err)
	}
	nsSel, err := selector(fr.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	var namespaces map[string]bool
	if !nsSel.Empty() {
		list := &corev1.NamespaceList{}
		if err := reader.List(ctx, list, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		namespaces = map[string]bool{}
		for _, ns := range list.Items {
			namespaces[ns.Name] = true
		}
	}
	list := &nodepoolv1.NodePoolList{}
	if err := reader.List(ctx, list, client.MatchingLabelsSelector{Selector: poolSel}); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var refs []fleet.Ref
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() && (namespaces == nil || namespaces[p.Namespace]) {
			refs = append(refs, fleet.Ref{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return refs, nil
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}
