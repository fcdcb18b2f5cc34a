package controller

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Metrics of the NodePool controller, on controller-runtime's registry
// (served at --metrics-bind-address).
var (
	pendingDrift = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_pending_management_drift",
		Help: "1 for each payload component in which a pool's running nodes differ from the latest platform payload.",
	}, []string{"namespace", "pool", "component"})
	driftAge = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_pending_management_drift_age_seconds",
		Help: "How long each pending management component has been pending.",
	}, []string{"namespace", "pool", "component"})
	rolloutsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_rollouts_started_total",
		Help: "Rollouts started, by initiator (spec, version, restart, platform, policy).",
	}, []string{"namespace", "pool", "initiator"})
	rolloutsCompleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_rollouts_completed_total",
		Help: "Rollouts ended, by initiator and outcome (Complete, Superseded).",
	}, []string{"namespace", "pool", "initiator", "outcome"})
	rolloutDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nodepool_rollout_duration_seconds",
		Help:    "Duration of completed rollouts.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 12), // 10s to ~5.7h
	}, []string{"initiator"})
	nodesUpdated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_inplace_nodes_updated_total",
		Help: "Nodes of InPlace pools that finished an in-place update.",
	}, []string{"namespace", "pool"})
	nodesUpdating = newPoolGaugeVec(prometheus.GaugeOpts{
		Name: "nodepool_inplace_nodes_updating",
		Help: "Nodes of an InPlace pool being updated, by phase (Draining, Updating) and agent state (Degraded, or none).",
	}, []string{"namespace", "pool", "phase", "state"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_reconcile_errors_total",
		Help: "Reconciles of a pool that failed, by stage.",
	}, []string{"namespace", "pool", "stage"})
	externalChangesRecorded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodepool_external_changes_total",
		Help: "Changes to a pool's MachineDeployment or MachineSets by a field manager outside nodepool and Cluster API, recorded in the pool's history (initiator external).",
	}, []string{"namespace", "pool"})
)

func init() {
	metrics.Registry.MustRegister(pendingDrift, driftAge, rolloutsStarted, rolloutsCompleted, rolloutDuration, reconcileErrors, nodesUpdated, nodesUpdating, externalChangesRecorded)
}

// observeDrift replaces the pool's drift series with its pending rows.
func observeDrift(pool *nodepoolv1.NodePool, now time.Time) {
	pendingDrift.reset(pool.Namespace, pool.Name)
	driftAge.reset(pool.Namespace, pool.Name)
	for _, row := range pool.Status.PendingManagementChanges {
		pendingDrift.setTo(1, pool.Namespace, pool.Name, row.Component)
		driftAge.setTo(now.Sub(row.Since.Time).Seconds(), pool.Namespace, pool.Name, row.Component)
	}
}

func forgetPool(pool *nodepoolv1.NodePool) {
	labels := prometheus.Labels{"namespace": pool.Namespace, "pool": pool.Name}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{rolloutsStarted, rolloutsCompleted, reconcileErrors, nodesUpdated, healthFailures, externalChangesRecorded} {
		v.DeletePartialMatch(labels)
	}
	for _, v := range []*poolGaugeVec{pendingDrift, driftAge, nodesUpdating, nextWindow, driftDeadline, healthPhase, lastReconcile, drainingNodes, drainBlockedNodes} {
		v.reset(pool.Namespace, pool.Name)
	}
}

func observeRolloutStarted(pool *nodepoolv1.NodePool, initiator string) {
	rolloutsStarted.WithLabelValues(pool.Namespace, pool.Name, initiatorLabel(initiator)).Inc()
}

func observeRolloutCompleted(pool *nodepoolv1.NodePool, initiator, outcome string, d time.Duration) {
	initiator = initiatorLabel(initiator)
	rolloutsCompleted.WithLabelValues(pool.Namespace, pool.Name, initiator, outcome).Inc()
	if d > 0 {
		rolloutDuration.WithLabelValues(initiator).Observe(d.Seconds())
	}
}

// initiatorLabel is the initiator label of the rollout metrics: a record's
// initiator, but "fleetrollout" for every fleet rollout's (its record says
// fleetrollout/<name>): a label value per FleetRollout would add series to
// every pool with each fleet rollout, without bound.
func initiatorLabel(initiator string) string {
	if strings.HasPrefix(initiator, nodepoolv1.FleetRolloutInitiatorPrefix) {
		return strings.TrimSuffix(nodepoolv1.FleetRolloutInitiatorPrefix, "/")
	}
	return initiator
}

// Stages of a reconcile, the values of the "stage" label of
// nodepool_reconcile_errors_total.
const (
	// stageRead: reading the pool's inputs or objects failed.
	stageRead = "read"
	// stageDecide: the engine did not decide.
	stageDecide = "decide"
	// stageHistory: writing the rollout's record failed.
	stageHistory = "history"
	// stageApply: carrying out the plan failed.
	stageApply = "apply"
	// stageConflict: an object of the pool's names is not the pool's.
	stageConflict = "conflict"
	// stageStatus: patching the pool's status failed.
	stageStatus = "status"
)

// observeExternalChange counts one external change recorded in the pool's
// history (external_record.go).
func observeExternalChange(pool *nodepoolv1.NodePool) {
	externalChangesRecorded.WithLabelValues(pool.Namespace, pool.Name).Inc()
}

func observeReconcileError(pool *nodepoolv1.NodePool, stage string) {
	reconcileErrors.WithLabelValues(pool.Namespace, pool.Name, stage).Inc()
}

// observeInPlace counts the nodes an InPlace pool updates, by phase, and
// the ones that finished in this reconcile.
func observeInPlace(pool *nodepoolv1.NodePool, in *rollout.InPlace, plan rollout.Plan) {
	if in == nil {
		return
	}
	nodesUpdating.reset(pool.Namespace, pool.Name)
	for _, m := range in.Machines {
		if m.Phase == "" {
			continue
		}
		state := ""
		if m.State == nodepoolv1.UpdateStateDegraded {
			state = m.State
		}
		nodesUpdating.addTo(1, pool.Namespace, pool.Name, m.Phase, state)
	}
	for _, a := range plan.NodeActions {
		if a.Step == rollout.StepFinish {
			nodesUpdated.WithLabelValues(pool.Namespace, pool.Name).Inc()
		}
	}
}
