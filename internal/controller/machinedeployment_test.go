package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// fixedSize is the engine's decision of timeoutsPool's count.
var fixedSize = rollout.Decision{Replicas: 2}

func timeoutsPool() *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers"},
		Spec:       nodepoolv1.NodePoolSpec{ClusterName: "c1", Replicas: ptr.To[int32](2)},
	}
}

// The drain and volume detach timeouts reach the machine template, and
// Cluster API replaces no machine for them.
func TestDeletionTimeoutsAreInPlaceOnTheMachineTemplate(t *testing.T) {
	target := &rollout.MachineDeploymentTarget{DataSecretName: "ud", Version: "v1.36.3", TemplateName: "small-abc", TemplateKind: "SimMachineTemplate.infrastructure.sim.nodepool.dev"}
	pool := timeoutsPool()
	before := &clusterv1.MachineDeployment{}
	desiredMachineDeployment(before, pool, fixedSize, target)
	if before.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds != nil {
		t.Fatalf("unset nodeVolumeDetachTimeout wrote %v", *before.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds)
	}
	pool.Spec.NodeDrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	pool.Spec.NodeVolumeDetachTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	after := before.DeepCopy()
	desiredMachineDeployment(after, pool, fixedSize, target)
	d := after.Spec.Template.Spec.Deletion
	if ptr.Deref(d.NodeDrainTimeoutSeconds, 0) != 600 || ptr.Deref(d.NodeVolumeDetachTimeoutSeconds, 0) != 300 {
		t.Fatalf("deletion %+v, want drain 600s and volume detach 300s", d)
	}
	if upToDate, res := mdutil.MachineTemplateUpToDate(&before.Spec.Template, &after.Spec.Template); !upToDate {
		t.Errorf("Cluster API would replace machines for a deletion timeout: %+v", res)
	}
	ms := &clusterv1.MachineSet{}
	desiredMachineSet(ms, pool, fixedSize, target)
	if ptr.Deref(ms.Spec.Template.Spec.Deletion.NodeVolumeDetachTimeoutSeconds, 0) != 300 {
		t.Errorf("InPlace MachineSet template deletion %+v, want volume detach 300s", ms.Spec.Template.Spec.Deletion)
	}
}

func TestTheHealthCheckOfAnAutoRepairPool(t *testing.T) {
	pool := timeoutsPool()
	pool.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{}
	mhc := &clusterv1.MachineHealthCheck{}
	desiredHealthCheck(mhc, pool, false)
	if mhc.Spec.ClusterName != "c1" || mhc.Spec.Selector.MatchLabels[nodepoolv1.LabelPool] != "workers" || mhc.Spec.Selector.MatchLabels[clusterv1.ClusterNameLabel] != "c1" {
		t.Errorf("cluster %q selector %v", mhc.Spec.ClusterName, mhc.Spec.Selector)
	}
	if ptr.Deref(mhc.Spec.Checks.NodeStartupTimeoutSeconds, 0) != 1200 {
		t.Errorf("nodeStartupTimeoutSeconds %v, want the default 1200", mhc.Spec.Checks.NodeStartupTimeoutSeconds)
	}
	conds := mhc.Spec.Checks.UnhealthyNodeConditions
	if len(conds) != 2 || conds[0].Status != corev1.ConditionFalse || conds[1].Status != corev1.ConditionUnknown || ptr.Deref(conds[0].TimeoutSeconds, 0) != 480 {
		t.Errorf("unhealthy node conditions %+v, want Ready False and Unknown for 480s", conds)
	}
	if got := mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo; got == nil || *got != intstr.FromInt32(2) {
		t.Errorf("unhealthyLessThanOrEqualTo %v, want 2", got)
	}
	if _, paused := mhc.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Error("an unpaused pool's health check is paused")
	}

	pool.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{
		NodeStartupTimeout: &metav1.Duration{}, UnhealthyTimeout: &metav1.Duration{Duration: 3 * time.Second}, MaxUnhealthy: ptr.To(intstr.FromString("40%")),
	}
	desiredHealthCheck(mhc, pool, true)
	if ptr.Deref(mhc.Spec.Checks.NodeStartupTimeoutSeconds, -1) != 0 || ptr.Deref(mhc.Spec.Checks.UnhealthyNodeConditions[1].TimeoutSeconds, 0) != 3 ||
		*mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo != intstr.FromString("40%") {
		t.Errorf("overrides not applied: %+v", mhc.Spec)
	}
	if mhc.Annotations[clusterv1.PausedAnnotation] != "true" {
		t.Error("a paused pool's health check is not paused")
	}
	desiredHealthCheck(mhc, pool, false)
	if _, paused := mhc.Annotations[clusterv1.PausedAnnotation]; paused {
		t.Error("the pause outlived the pool's")
	}
	if s := poolSelector(pool); s != "cluster.x-k8s.io/cluster-name=c1,nodepool.dev/pool=workers" {
		t.Errorf("status.selector %q", s)
	}
}

// While the health gate's canary is on trial the engine asks for
// maxSurge = canary and maxUnavailable = 0; the controller writes them
// over the spec's, and the spec's again once the target drops them.
func TestTheCanarysSurgeReachesTheMachineDeployment(t *testing.T) {
	pool := timeoutsPool()
	pool.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(3))
	pool.Spec.Management.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	target := &rollout.MachineDeploymentTarget{DataSecretName: "ud", Version: "v1.36.3",
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
	md := &clusterv1.MachineDeployment{}
	desiredMachineDeployment(md, pool, fixedSize, target)
	ru := md.Spec.Rollout.Strategy.RollingUpdate
	if *ru.MaxSurge != intstr.FromInt32(1) || *ru.MaxUnavailable != intstr.FromInt32(0) {
		t.Errorf("during the canary maxSurge %v maxUnavailable %v, want 1 and 0", ru.MaxSurge, ru.MaxUnavailable)
	}
	target.MaxSurge, target.MaxUnavailable = nil, nil
	desiredMachineDeployment(md, pool, fixedSize, target)
	ru = md.Spec.Rollout.Strategy.RollingUpdate
	if *ru.MaxSurge != intstr.FromInt32(3) || *ru.MaxUnavailable != intstr.FromInt32(2) {
		t.Errorf("after the canary maxSurge %v maxUnavailable %v, want the spec's 3 and 2", ru.MaxSurge, ru.MaxUnavailable)
	}
}

// A MachineDeployment paused behind the pool's back (clusterctl alpha
// rollout pause without the admission policy) is resumed: the pool's own
// pause is spec.management.pausedUntil, and a paused MachineDeployment
// would hold its next rollout unseen.
func TestAPausedMachineDeploymentIsResumed(t *testing.T) {
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Paused: ptr.To(true)}}
	desiredMachineDeployment(md, timeoutsPool(), fixedSize, nil)
	if md.Spec.Paused != nil {
		t.Errorf("spec.paused is %v after the controller's write, want it cleared", *md.Spec.Paused)
	}
}
