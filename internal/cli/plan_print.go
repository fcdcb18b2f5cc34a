package cli

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
)

// inPlaceChanges lists what changes without replacing a machine.
func inPlaceChanges(live, pool *nodepoolv1.NodePool) []string {
	if live == nil {
		return nil
	}
	a, b := &live.Spec, &pool.Spec
	var out []string
	if !equality.Semantic.DeepEqual(a.NodeLabels, b.NodeLabels) {
		out = append(out, "nodeLabels")
	}
	if !equality.Semantic.DeepEqual(a.Taints, b.Taints) {
		out = append(out, "taints")
	}
	if !equality.Semantic.DeepEqual(a.NodeDrainTimeout, b.NodeDrainTimeout) {
		out = append(out, "nodeDrainTimeout")
	}
	if !equality.Semantic.DeepEqual(a.NodeVolumeDetachTimeout, b.NodeVolumeDetachTimeout) {
		out = append(out, "nodeVolumeDetachTimeout")
	}
	if !equality.Semantic.DeepEqual(a.Management.AutoRepair, b.Management.AutoRepair) {
		out = append(out, "autoRepair "+autoRepair(a)+"→"+autoRepair(b))
	}
	if !equality.Semantic.DeepEqual(a.Replicas, b.Replicas) || !equality.Semantic.DeepEqual(a.AutoScaling, b.AutoScaling) {
		out = append(out, "replicas "+size(a)+"→"+size(b))
	}
	if !equality.Semantic.DeepEqual(a.Management.Replace, b.Management.Replace) {
		out = append(out, "management.replace")
	}
	if !equality.Semantic.DeepEqual(a.Management.Health, b.Management.Health) {
		out = append(out, "management.health")
	}
	if a.Management.ManagementUpdates != b.Management.ManagementUpdates {
		out = append(out, "managementUpdates "+string(a.Management.ManagementUpdates)+"→"+string(b.Management.ManagementUpdates))
	}
	return out
}

func autoRepair(s *nodepoolv1.NodePoolSpec) string {
	if s.Management.AutoRepair == nil {
		return "off"
	}
	return "on"
}

func size(s *nodepoolv1.NodePoolSpec) string {
	if s.AutoScaling != nil {
		return fmt.Sprintf("%d-%d", s.AutoScaling.Min, s.AutoScaling.Max)
	}
	return fmt.Sprint(ptr.Deref(s.Replicas, 0))
}

func planMessage(r *PlanResult, waits string, pool *nodepoolv1.NodePool) string {
	var parts []string
	how := fmt.Sprintf("%d machines replaced in %d steps (RollingUpdate, maxSurge %d, maxUnavailable %d)", r.Machines, r.Steps, r.MaxSurge, r.MaxUnavailable)
	switch r.Strategy {
	case rollout.StrategyInPlace:
		how = fmt.Sprintf("%d machines updated in place in %d steps (maxUnavailable %d: each node cordoned, drained, updated, uncordoned)", r.Machines, r.Steps, r.MaxUnavailable)
	case string(nodepoolv1.ReplaceStrategyRollingUpdate):
	default:
		how = fmt.Sprintf("%d machines replaced as they are deleted (strategy %s)", r.Machines, r.Strategy)
	}
	switch r.Rollout {
	case PlanNow:
		parts = append(parts, fmt.Sprintf("nodes roll now (initiator %s): %s", r.Initiator, how))
	case PlanDeferred:
		if r.RollsAt != nil {
			parts = append(parts, fmt.Sprintf("nodes roll at %s (next window): %s; %s", r.RollsAt.UTC().Format(time.RFC3339), how, waits))
			break
		}
		parts = append(parts, fmt.Sprintf("nodes roll when the pause ends: %s; %s", how, waits))
	case PlanScheduled:
		parts = append(parts, fmt.Sprintf("nodes roll later: %s; %s", how, waits))
	default:
		if u := pool.Status.Updating; u != "" {
			parts = append(parts, "no machine is replaced beyond the rollout in progress (updating "+u+")")
		} else {
			parts = append(parts, "no machine is replaced")
		}
	}
	if h := healthSentence(r); h != "" { // plan_health.go
		parts = append(parts, h)
	}
	if len(r.InPlace) > 0 {
		parts = append(parts, "applied in place: "+strings.Join(r.InPlace, ", "))
	}
	if r.Rolls && r.Window != "" {
		parts = append(parts, r.Window) // with what a drain block does to it
	} else if r.Rolls && r.DrainStall != "" {
		parts = append(parts, r.DrainStall)
	}
	if len(r.PendingDrift) > 0 {
		note := "they apply at the next rollout"
		if pool.Spec.Management.ManagementUpdates == nodepoolv1.ManagementUpdatesNewNodes {
			note = "new nodes boot them already (managementUpdates: NewNodes)"
		}
		parts = append(parts, fmt.Sprintf("platform changes pending: %s (%s)", strings.Join(r.PendingDrift, ", "), note))
	} else if r.Rolls {
		var mgmt []string
		for _, c := range r.Changed {
			if c.Class == string(inputs.ClassManagement) {
				mgmt = append(mgmt, c.Component)
			}
		}
		if len(mgmt) > 0 {
			parts = append(parts, "the new nodes also get the pending platform changes: "+strings.Join(mgmt, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func printPlan(o *Options, results []PlanResult) error {
	t := &table{header: []string{"NAMESPACE", "POOL", "ROLLOUT", "INITIATOR", "CHANGED", "MACHINES", "STEPS", "IN-PLACE", "PENDING-DRIFT"}}
	for _, r := range results {
		var changed []string
		for _, c := range r.Changed {
			changed = append(changed, c.Component)
		}
		t.add(r.Namespace, r.Pool, r.Rollout, or(r.Initiator, "-"), or(strings.Join(changed, ","), "-"),
			fmt.Sprint(r.Machines), fmt.Sprint(r.Steps), or(strings.Join(r.InPlace, ","), "-"), or(strings.Join(r.PendingDrift, ","), "-"))
	}
	if err := t.print(o.out()); err != nil {
		return err
	}
	fmt.Fprintln(o.out())
	for _, r := range results {
		fmt.Fprintf(o.out(), "%s/%s: %s\n", r.Namespace, r.Pool, r.Message)
		printDrains(o.out(), r) // plan_drain.go
		for _, w := range r.Warnings {
			fmt.Fprintf(o.ErrOut, "Warning: %s/%s: %s\n", r.Namespace, r.Pool, w)
		}
	}
	return nil
}
