package fleet

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// Observe is what a fleet rollout reads of a pool: its status, conditions
// and annotations (the controller adds its history record, see Record).
func Observe(pool *nodepoolv1.NodePool, now time.Time) Pool {
	st := pool.Status
	falseCond := func(t string) *Condition {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionFalse {
			return &Condition{Reason: c.Reason, Message: c.Message}
		}
		return nil
	}
	at, outside := pool.Annotations[nodepoolv1.AnnotationApplyPending], ""
	if at != "" && pool.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] == at {
		outside = pool.Annotations[nodepoolv1.AnnotationOutsideWindowsReason]
	}
	return Pool{
		Exists:    pool.DeletionTimestamp.IsZero(),
		HasDrift:  len(st.PendingManagementChanges) > 0,
		Paused:    poolmath.PauseAt(pool, now).Paused,
		Updating:  st.Updating != "",
		Held:      falseCond(nodepoolv1.ConditionMaintenanceWindow),
		Unhealthy: Halt(pool),
		Ready:     meta.IsStatusConditionTrue(st.Conditions, nodepoolv1.ConditionReady),
		// The engine's standing says whether the pool is settled
		// (status.rollout, internal/rollout/standing.go), for the
		// generation the controller saw.
		Settled:       st.ObservedGeneration == pool.Generation && st.Rollout != nil && st.Rollout.Settled,
		Replicas:      st.Replicas,
		Fleet:         pool.Annotations[nodepoolv1.AnnotationFleetRollout],
		At:            at,
		OutsideReason: outside,
	}
}

// Halt is the pool's halt as its standing says it (status.rollout:
// Halted or RollingBack), named by RolloutHealthy when that says why;
// only a pool an older controller published no standing for is read
// from the condition alone. Nil when the pool is not halted.
func Halt(pool *nodepoolv1.NodePool) *Condition {
	var cond *Condition
	if c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy); c != nil && c.Status == metav1.ConditionFalse {
		cond = &Condition{Reason: c.Reason, Message: c.Message}
	}
	r := pool.Status.Rollout
	if r == nil {
		return cond
	}
	if r.Phase != nodepoolv1.RolloutPhaseHalted && r.Phase != nodepoolv1.RolloutPhaseRollingBack {
		return nil
	}
	if cond != nil {
		return cond
	}
	return &Condition{Reason: string(r.Phase), Message: r.Message}
}

// MemberOf is the pool's kept state in the fleet rollout name: ok is
// false when the pool is not one of its members; err says why a kept
// state cannot be read.
func MemberOf(pool *nodepoolv1.NodePool, name string) (p nodepoolv1.FleetRolloutPool, ok bool, err error) {
	v, ok := pool.Annotations[nodepoolv1.FleetRolloutPoolAnnotation(name)]
	if !ok {
		return p, false, nil
	}
	p, err = Decode(pool.Namespace, pool.Name, v)
	return p, err == nil, err
}

// RolloutsOf names the fleet rollouts the pool is a member of.
func RolloutsOf(pool *nodepoolv1.NodePool) []string {
	var out []string
	for k := range pool.Annotations {
		if len(k) > len(nodepoolv1.FleetRolloutPoolAnnotationPrefix) && k[:len(nodepoolv1.FleetRolloutPoolAnnotationPrefix)] == nodepoolv1.FleetRolloutPoolAnnotationPrefix {
			out = append(out, k[len(nodepoolv1.FleetRolloutPoolAnnotationPrefix):])
		}
	}
	return out
}

// PoolsOf is every member of the fleet rollout fr among pools, with its
// state now (see View): what `kubectl nodepool fleet rollout status`
// shows. A member whose kept state cannot be read is left out, its error
// in errs.
func PoolsOf(fr *nodepoolv1.FleetRollout, pools []nodepoolv1.NodePool, now time.Time) (out []nodepoolv1.FleetRolloutPool, errs []error) {
	in := Input{Name: fr.Name, Spec: fr.Spec, Status: fr.Status, Generation: fr.Generation, Pools: map[Ref]Pool{}, Now: now}
	for i := range pools {
		pool := &pools[i]
		m, ok, err := MemberOf(pool, fr.Name)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		in.Members = append(in.Members, m)
		in.Pools[RefOf(m)] = Observe(pool, now)
	}
	return View(in), errs
}
