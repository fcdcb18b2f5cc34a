package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

var (
	drainingNodes = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_draining_nodes",
		Help: "Nodes of a pool being drained now (status.drains).",
	}, []string{"namespace", "pool"})
	drainBlockedNodes = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_drain_blocked_nodes",
		Help: "Nodes of a pool whose drain has lasted spec.management.drain.timeout (10m unless set) with pods left, by the policy applied (Wait, Force, Halt).",
	}, []string{"namespace", "pool", "on_timeout"})
)

func init() {
	metrics.Registry.MustRegister(drainingNodes, drainBlockedNodes)
}

// observeDrains replaces the pool's drain series with what the plan
// reports.
func observeDrains(pool *nodepoolv1.NodePool, plan rollout.Plan) {
	drainingNodes.reset(pool.Namespace, pool.Name)
	drainBlockedNodes.reset(pool.Namespace, pool.Name)
	policy := string(nodepoolv1.DrainWait)
	if d := plan.Decision.Drain; d != nil {
		policy = string(d.Policy.OnTimeout)
	}
	drainingNodes.setTo(float64(len(plan.Drains)), pool.Namespace, pool.Name)
	blocked := 0
	for _, d := range plan.Drains {
		if d.Blocked {
			blocked++
		}
	}
	drainBlockedNodes.setTo(float64(blocked), pool.Namespace, pool.Name, policy)
}
