package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Metrics of the health gate (spec.management.health).
var (
	healthPhase = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_rollout_health_phase",
		Help: "1 for the phase of a health-gated pool's rollout (Idle, Canary, Soaking, Rolling, Halted, RollingBack, RolledBack).",
	}, []string{"namespace", "pool", "phase"})
	healthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_rollout_health_failures_total",
		Help: "Rollouts the health gate stopped, by reason (RolloutHalted, ProgressDeadlineExceeded, RollingBack).",
	}, []string{"namespace", "pool", "reason"})
)

func init() {
	metrics.Registry.MustRegister(healthPhase, healthFailures)
}

// observeHealth sets the pool's health phase and counts a new failure (the
// plan's Warning event of a RolloutHealthy change).
func observeHealth(pool *nodepoolv1.NodePool, plan rollout.Plan) {
	healthPhase.reset(pool.Namespace, pool.Name)
	h := plan.Decision.Health
	if h == nil {
		// Few pools ever fail a gate: this vector stays small to scan.
		healthFailures.DeletePartialMatch(prometheus.Labels{"namespace": pool.Namespace, "pool": pool.Name})
		return
	}
	phase := string(h.Phase)
	if phase == "" {
		phase = "Idle"
	}
	healthPhase.setTo(1, pool.Namespace, pool.Name, phase)
	for _, e := range plan.Events {
		switch e.Reason {
		case nodepoolv1.ReasonRolloutHalted, nodepoolv1.ReasonProgressDeadlineExceeded, nodepoolv1.ReasonRollingBack:
			healthFailures.WithLabelValues(pool.Namespace, pool.Name, e.Reason).Inc()
		}
	}
}
