package poolmath

import (
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// DefaultDrainTimeout is how long a drain may last before it is reported
// blocked when spec.management.drain sets no timeout.
const DefaultDrainTimeout = 10 * time.Minute

// DrainPolicy is the pool's drain policy, resolved: what happens once a
// node has drained for Timeout with pods left.
type DrainPolicy struct {
	OnTimeout nodepoolv1.DrainTimeoutPolicy
	Timeout   time.Duration
}

// Drain resolves the pool's drain policy: spec.management.drain; else
// spec.nodeDrainTimeout, which is Force after it; else Wait, reported
// blocked after DefaultDrainTimeout.
func Drain(pool *nodepoolv1.NodePool) DrainPolicy {
	if d := pool.Spec.Management.Drain; d != nil {
		out := DrainPolicy{OnTimeout: d.OnTimeout, Timeout: DefaultDrainTimeout}
		if out.OnTimeout == "" {
			out.OnTimeout = nodepoolv1.DrainWait
		}
		if d.Timeout != nil && d.Timeout.Duration > 0 {
			out.Timeout = d.Timeout.Duration
		}
		return out
	}
	if t := pool.Spec.NodeDrainTimeout; t != nil && t.Duration > 0 {
		return DrainPolicy{OnTimeout: nodepoolv1.DrainForce, Timeout: t.Duration}
	}
	return DrainPolicy{OnTimeout: nodepoolv1.DrainWait, Timeout: DefaultDrainTimeout}
}

// ForceAfter is how long a node drains before it is forced: the policy's
// timeout with Force, 0 (never) otherwise. It is Cluster API's
// nodeDrainTimeout for Replace pools and the InPlace update's.
func (p DrainPolicy) ForceAfter() time.Duration {
	if p.OnTimeout == nodepoolv1.DrainForce {
		return p.Timeout
	}
	return 0
}
