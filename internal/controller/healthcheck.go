package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The defaults of spec.management.autoRepair.
const (
	DefaultNodeStartupTimeout = 20 * time.Minute
	DefaultUnhealthyTimeout   = 8 * time.Minute
	DefaultMaxUnhealthy       = 2
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list;watch;create;update;patch;delete

// poolMachineLabels select the pool's Machines: both kinds of pool put
// them on their machine template.
func poolMachineLabels(pool *nodepoolv1.NodePool) map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: pool.Spec.ClusterName, nodepoolv1.LabelPool: pool.Name}
}

// poolSelector is status.selector: the pool's Machines' label selector in
// kubectl's -l form, what the scale subresource reports.
func poolSelector(pool *nodepoolv1.NodePool) string {
	return labels.SelectorFromSet(poolMachineLabels(pool)).String()
}

// desiredHealthCheck sets on mhc everything the controller owns of an
// autoRepair pool's MachineHealthCheck: the pool's Machines, a node that
// does not start or is not Ready for too long is unhealthy, at most
// maxUnhealthy are repaired, and Cluster API's paused annotation while the
// pool is paused (a repair replaces a machine; a paused pool replaces none
// on its own).
func desiredHealthCheck(mhc *clusterv1.MachineHealthCheck, pool *nodepoolv1.NodePool, paused bool) {
	a := pool.Spec.Management.AutoRepair
	mhc.Namespace, mhc.Name = pool.Namespace, pool.Name
	if mhc.Labels == nil {
		mhc.Labels = map[string]string{}
	}
	for k, v := range poolMachineLabels(pool) {
		mhc.Labels[k] = v
	}
	if paused {
		if mhc.Annotations == nil {
			mhc.Annotations = map[string]string{}
		}
		mhc.Annotations[clusterv1.PausedAnnotation] = "true"
	} else {
		delete(mhc.Annotations, clusterv1.PausedAnnotation)
	}
	seconds := func(d *metav1.Duration, def time.Duration) *int32 {
		v := def
		if d != nil {
			v = d.Duration
		}
		return ptr.To(int32(min(v.Seconds(), math.MaxInt32)))
	}
	unhealthy := seconds(a.UnhealthyTimeout, DefaultUnhealthyTimeout)
	mhc.Spec.ClusterName = pool.Spec.ClusterName
	mhc.Spec.Selector = metav1.LabelSelector{MatchLabels: poolMachineLabels(pool)}
	mhc.Spec.Checks = clusterv1.MachineHealthCheckChecks{
		NodeStartupTimeoutSeconds: seconds(a.NodeStartupTimeout, DefaultNodeStartupTimeout),
		UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: unhealthy},
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: unhealthy},
		},
	}
	mhc.Spec.Remediation.TriggerIf = clusterv1.MachineHealthCheckRemediationTriggerIf{
		UnhealthyLessThanOrEqualTo: ptr.To(ptr.Deref(a.MaxUnhealthy, intstr.FromInt32(DefaultMaxUnhealthy))),
	}
}

// applyHealthCheck creates, updates or deletes the pool's
// MachineHealthCheck as spec.management.autoRepair says, paused while the
// engine says the pool is (Decision.Pause). Only one the pool owns is ever
// changed or deleted.
func (r *Reconciler) applyHealthCheck(ctx context.Context, pool *nodepoolv1.NodePool, paused bool) error {
	current := &clusterv1.MachineHealthCheck{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Name}, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return fmt.Errorf("reading MachineHealthCheck: %w", err)
	case !metav1.IsControlledBy(current, pool):
		if pool.Spec.Management.AutoRepair == nil {
			return nil
		}
		return &conflictError{objects: []string{"MachineHealthCheck " + pool.Name}}
	}
	if pool.Spec.Management.AutoRepair == nil || !pool.DeletionTimestamp.IsZero() {
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return nil
		}
		if err := r.Client.Delete(ctx, current); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting MachineHealthCheck: %w", err)
		}
		return nil
	}
	if current == nil {
		mhc := &clusterv1.MachineHealthCheck{}
		desiredHealthCheck(mhc, pool, paused)
		if err := controllerutil.SetControllerReference(pool, mhc, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, mhc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating MachineHealthCheck: %w", err)
		}
		return nil
	}
	mhc := current.DeepCopy()
	desiredHealthCheck(mhc, pool, paused)
	if equality.Semantic.DeepEqual(mhc, current) {
		return nil
	}
	if err := r.Client.Patch(ctx, mhc, client.MergeFrom(current)); err != nil {
		return fmt.Errorf("patching MachineHealthCheck: %w", err)
	}
	return nil
}
