package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// errStalePool stops a reconcile that decided on a pool older than the API
// server's: it writes nothing, and the pool's newer version, whose watch
// event is on its way, is reconciled next.
var errStalePool = errors.New("the cached pool is older than the API server's")

// checkFresh fails with errStalePool when the API server's pool has a
// newer spec (generation) or other annotations than the one the reconcile
// decided on. Status writes, the controller's own, do not count. One
// metadata read, made only when a rollout is about to start.
func (r *Reconciler) checkFresh(ctx context.Context, pool *nodepoolv1.NodePool) error {
	if r.APIReader == nil {
		return nil
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(nodepoolv1.GroupVersion.WithKind("NodePool"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pool), live); err != nil {
		return fmt.Errorf("reading the pool before starting a rollout: %w", err)
	}
	if live.Generation != pool.Generation || !maps.Equal(live.Annotations, pool.Annotations) {
		staleDecisions.Inc()
		return errStalePool
	}
	return nil
}

// staleDecisions counts rollouts not started because the cache's pool was
// older than the API server's.
var staleDecisions = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "nodepool_stale_pool_decisions_total",
	Help: "Reconciles that decided nothing because the cache held an older pool than the API server's (a rollout about to start) or an older rollout record, token or user-data Secret, MachineDeployment or MachineSet than the controller wrote.",
})

func init() { metrics.Registry.MustRegister(staleDecisions) }
