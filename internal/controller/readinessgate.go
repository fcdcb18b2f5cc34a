package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/rollout"
)

// The health gate of a Replace pool with spec.management.health works
// through Cluster API: the MachineDeployment's machine template lists the
// condition nodepool.dev/Healthy as a readiness gate, so a machine counts
// as Ready, and so available, only once nodepool sets that condition True.
// Cluster API propagates a template's readinessGates to the MachineSets and
// Machines in place (they are among the fields it never rolls machines
// for), so enabling, changing or removing the gate replaces no machine.
// Its rolling update never goes beyond maxSurge extra or maxUnavailable
// unavailable machines: a gate held False stops it where it is.
//
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines/status,verbs=patch

// gateFieldOwner is the server-side apply field manager of the gate
// condition: it owns that one entry of a Machine's conditions, never the
// ones Cluster API writes.
const gateFieldOwner = "nodepool-health-gate"

// healthReadinessGates is the machine template's readinessGates: the
// health gate for a pool with spec.management.health, none otherwise.
func healthReadinessGates(pool *nodepoolv1.NodePool) []clusterv1.MachineReadinessGate {
	if pool.Spec.Management.Health == nil {
		return nil
	}
	return []clusterv1.MachineReadinessGate{{ConditionType: nodepoolv1.HealthGateCondition}}
}

// observeMachineHealth fills in.Machines for a pool with a health gate
// (internal/observe, shared with the CLI), from the Nodes read.
func observeMachineHealth(pool *nodepoolv1.NodePool, w *world, in *rollout.Input) {
	if !w.nodesRead {
		return // without the Nodes nothing can be judged: no gate changes
	}
	nodes := make(map[string]*corev1.Node, len(w.nodes))
	for i := range w.nodes {
		nodes[w.nodes[i].Name] = &w.nodes[i]
	}
	in.Machines = observe.MachineHealth(pool, w.MachineSets, w.Machines, nodes)
}

// applyGates writes the plan's gate conditions on the pool's Machines by
// server-side apply of that one condition.
func (r *Reconciler) applyGates(ctx context.Context, w *world, gates []rollout.GateAction) error {
	if len(gates) == 0 {
		return nil
	}
	byName := make(map[string]*clusterv1.Machine, len(w.Machines))
	for i := range w.Machines {
		byName[w.Machines[i].Name] = &w.Machines[i]
	}
	now := metav1.NewTime(r.now())
	for _, g := range gates {
		m, ok := byName[g.Machine]
		if !ok {
			continue
		}
		status := metav1.ConditionFalse
		if g.Status {
			status = metav1.ConditionTrue
		}
		since := now
		if c := meta.FindStatusCondition(m.Status.Conditions, nodepoolv1.HealthGateCondition); c != nil && c.Status == status {
			since = c.LastTransitionTime
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterv1.GroupVersion.String(),
			"kind":       "Machine",
			"metadata":   map[string]any{"name": m.Name, "namespace": m.Namespace},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": nodepoolv1.HealthGateCondition, "status": string(status), "reason": g.Reason, "message": g.Message,
				"lastTransitionTime": since.UTC().Format("2006-01-02T15:04:05Z"), "observedGeneration": m.Generation,
			}}},
		}}
		if err := r.Client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(gateFieldOwner), client.ForceOwnership); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("setting the health gate of Machine %s: %w", m.Name, err)
		}
	}
	return nil
}
