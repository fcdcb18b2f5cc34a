package observe

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// MachineHealth is the health gate's view of the pool's machines (nil for
// a pool without spec.management.health): each machine's rollout, its
// node's health and its nodepool.dev/Healthy condition. nodes are the
// pool's Nodes by name, as the controller reads them from the workload
// cluster; without them (nil: the CLI, which does not reach workload
// clusters) a node's health is read from the Machine's NodeReady
// condition, which Cluster API mirrors from the Node's Ready.
func MachineHealth(pool *nodepoolv1.NodePool, sets []clusterv1.MachineSet, machines []clusterv1.Machine, nodes map[string]*corev1.Node) []rollout.MachineHealth {
	h := pool.Spec.Management.Health
	if h == nil {
		return nil
	}
	setCreated := make(map[string]time.Time, len(sets))
	for _, ms := range sets {
		setCreated[ms.Name] = ms.CreationTimestamp.Time
	}
	out := make([]rollout.MachineHealth, 0, len(machines))
	for i := range machines {
		m := &machines[i]
		mh := rollout.MachineHealth{Name: m.Name, UserData: ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), Version: m.Spec.Version,
			Created: m.CreationTimestamp.Time, SetCreated: setCreated[m.Labels[clusterv1.MachineSetNameLabel]],
			Deleting: !m.DeletionTimestamp.IsZero(), Signal: "no node yet"}
		if m.Status.NodeRef.IsDefined() {
			mh.Node = m.Status.NodeRef.Name
			switch n, ok := nodes[mh.Node]; {
			case ok:
				mh.Healthy, mh.HealthySince, mh.Signal = rollout.NodeHealth(h, n.Status.Conditions)
			case nodes != nil:
				mh.Node, mh.Signal = "", "its Node "+m.Status.NodeRef.Name+" is gone"
			default:
				mh.Healthy, mh.HealthySince, mh.Signal = rollout.NodeHealth(&nodepoolv1.Health{}, mirroredReady(m))
			}
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, nodepoolv1.HealthGateCondition); c != nil {
			mh.Gate = &rollout.Gate{Status: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		}
		out = append(out, mh)
	}
	return out
}

// mirroredReady is a Node Ready condition as the Machine's NodeReady
// condition mirrors it.
func mirroredReady(m *clusterv1.Machine) []corev1.NodeCondition {
	c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineNodeReadyCondition)
	if c == nil {
		return nil
	}
	return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionStatus(c.Status), Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}}
}
