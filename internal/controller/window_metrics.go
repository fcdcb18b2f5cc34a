package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Metrics of maintenance windows.
var (
	nextWindow = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_maintenance_next_window_seconds",
		Help: "Seconds until a pool's next maintenance window opens for platform rollouts (0 while one is open), for pools with spec.management.maintenance.",
	}, []string{"namespace", "pool"})
	driftDeadline = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_pending_management_drift_deadline_seconds",
		Help: "Seconds until each pending management component reaches spec.management.maintenance.driftDeadline (negative once passed: it is applied at the next window).",
	}, []string{"namespace", "pool", "component"})
)

func init() {
	metrics.Registry.MustRegister(nextWindow, driftDeadline)
}

// observeWindow replaces the pool's window series with what its status
// says now.
func observeWindow(pool *nodepoolv1.NodePool, now time.Time) {
	nextWindow.reset(pool.Namespace, pool.Name)
	driftDeadline.reset(pool.Namespace, pool.Name)
	m := pool.Spec.Management.Maintenance
	if m == nil {
		return
	}
	if st := pool.Status.Maintenance; st != nil && st.NextWindow != nil {
		nextWindow.setTo(max(0, st.NextWindow.Start.Sub(now).Seconds()), pool.Namespace, pool.Name)
	}
	if m.DriftDeadline == nil {
		return
	}
	for _, row := range pool.Status.PendingManagementChanges {
		at := row.Since.Add(m.DriftDeadline.Duration)
		driftDeadline.setTo(at.Sub(now).Seconds(), pool.Namespace, pool.Name, row.Component)
	}
}
