package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// lastReconcile is when the controller last finished a reconcile of each
// pool it owns, whatever its outcome (nodepool_reconcile_errors_total
// counts the failed ones): one series per pool, deleted with the pool. A
// settled pool is reconciled at least every --resync-period, so a series
// much older than that says the controller stopped looking at the pool.
var lastReconcile = newPoolGaugeVec(prometheus.GaugeOpts{
	Name: "nodepool_pool_last_reconcile_timestamp_seconds",
	Help: "Unix time at which the controller last finished a reconcile of the pool, whatever its outcome (one series per pool).",
}, []string{"namespace", "pool"})

func init() {
	metrics.Registry.MustRegister(lastReconcile)
}

// observeReconciled records that a reconcile of the pool ended at now. The
// pool's count of external changes is exported from its first reconcile,
// at 0: an increase of a series that starts at 1 is none.
func observeReconciled(pool *nodepoolv1.NodePool, now time.Time) {
	lastReconcile.setTo(float64(now.UnixMilli())/1e3, pool.Namespace, pool.Name)
	externalChangesRecorded.WithLabelValues(pool.Namespace, pool.Name)
}
