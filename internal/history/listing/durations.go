// Package listing reads a pool's rollout history from the API server; the
// history's vocabulary (its records, their encoding, the past rollouts a
// prediction reads) is package history, which does no I/O.
package listing

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// RecentRollouts reads the pool's revisions and returns history.Rollouts of
// them.
func RecentRollouts(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) ([]poolmath.PastRollout, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(pool.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the pool's history: %w", err)
	}
	return history.Rollouts(history.Records(pool, list.Items), history.RecentLimit), nil
}
