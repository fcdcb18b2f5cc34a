package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// MachineHealth is what the health gate knows of one machine of the pool.
type MachineHealth struct {
	Name string
	// UserData is the machine's spec.bootstrap.dataSecretName and Version
	// its spec.version: the rollout it belongs to.
	UserData, Version string
	Created           time.Time
	// SetCreated is its MachineSet's creation time, what Cluster API
	// compares with spec.rollout.after (Created when unknown): a forced
	// rollout replaces the machines of MachineSets made before its time,
	// and its own machines are those of MachineSets made since.
	SetCreated time.Time
	Deleting   bool
	// Node is the name of its Node, "" when it has none yet.
	Node string
	// Healthy says whether the Node is healthy now (NodeHealth), since
	// when, and otherwise the failing signal.
	Healthy      bool
	HealthySince time.Time
	Signal       string
	// Gate is the machine's nodepool.dev/Healthy condition, nil when unset.
	Gate *Gate
}

// Gate is the state of a machine's health gate condition.
type Gate struct {
	Status          bool
	Reason, Message string
	Since           time.Time
}

// NodeHealth says whether a node is healthy by the pool's definition: its
// Ready condition is True, no unhealthy condition matches, every required
// condition is True. since is the last transition of any of those
// conditions (the node has been healthy at least since then); signal names
// the first failing one.
func NodeHealth(h *nodepoolv1.Health, conds []corev1.NodeCondition) (healthy bool, since time.Time, signal string) {
	find := func(t string) *corev1.NodeCondition {
		for i := range conds {
			if string(conds[i].Type) == t {
				return &conds[i]
			}
		}
		return nil
	}
	later := func(c *corev1.NodeCondition) {
		if c != nil && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	describe := func(c *corev1.NodeCondition) string {
		s := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		return s
	}
	ready := find(string(corev1.NodeReady))
	switch {
	case ready == nil:
		return false, time.Time{}, "Ready condition not reported"
	case ready.Status != corev1.ConditionTrue:
		return false, time.Time{}, describe(ready)
	}
	later(ready)
	if h == nil {
		return true, since, ""
	}
	for _, m := range h.UnhealthyConditions {
		c := find(m.Type)
		if c != nil && string(c.Status) == m.Status {
			return false, time.Time{}, describe(c)
		}
		later(c)
	}
	for _, t := range h.RequiredConditions {
		c := find(t)
		if c == nil {
			return false, time.Time{}, t + " condition not reported"
		}
		if c.Status != corev1.ConditionTrue {
			return false, time.Time{}, describe(c)
		}
		later(c)
	}
	return true, since, ""
}
