package sim

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// What a simulated kubelet reports besides what the machine's spec says.
const (
	defaultCPUs   = 2
	defaultMemory = "4Gi"
	maxPods       = 110
	diskSize      = "100Gi"
	osImage       = "nodepool sim"
	kernelVersion = "6.12.0-sim"
	runtimeName   = "sim://1.0.0"
)

// runNode registers the Node of a machine that booted its payload, or
// keeps it registered, with the health the machine's knobs say, and
// reports the machine provisioned.
func (r *machineReconciler) runNode(ctx context.Context, sm *simv1.SimMachine, machine *clusterv1.Machine, k knobs) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cluster := clusterOf(sm, machine)
	notRegistered := func(err error) (ctrl.Result, error) {
		delay := r.retryDelay(ctx, sm, err)
		if ptr.Deref(sm.Status.Initialization.Provisioned, false) {
			setNodeHealthy(sm, metav1.ConditionUnknown, simv1.ReasonNoNode, fmt.Sprintf("cannot check the Node: %v", err))
			return ctrl.Result{RequeueAfter: delay}, nil
		}
		r.reportBoot(sm, bootStep{reason: simv1.ReasonRegisteringNode,
			message: fmt.Sprintf("booted payload %s but cannot register its Node yet: %v; retrying", payload.Short(sm.Status.BootedPayload), err)})
		return ctrl.Result{RequeueAfter: delay}, nil
	}
	wc, err := r.workload.GetClient(ctx, cluster)
	if err != nil {
		return notRegistered(fmt.Errorf("cannot reach the workload cluster of Cluster %s: %w", cluster, err))
	}
	name := nodeName(sm)
	node := &corev1.Node{}
	err = wc.Get(ctx, client.ObjectKey{Name: name}, node)
	if apierrors.IsNotFound(err) {
		node = newNode(sm, cluster)
		if err = wc.Create(ctx, node); err == nil {
			// The Booted Event says so too; one Event per boot is enough.
			log.Info("Registered Node", "node", name, "payload", payload.Short(sm.Status.BootedPayload))
		} else if apierrors.IsAlreadyExists(err) {
			err = wc.Get(ctx, client.ObjectKey{Name: name}, node)
		}
	}
	if err != nil {
		return notRegistered(fmt.Errorf("Node %s: %w", name, err))
	}
	if node.Spec.ProviderID != providerID(sm) {
		return notRegistered(fmt.Errorf("Node %s exists with providerID %q, not %q: another machine owns that name; delete the stale Node", name, node.Spec.ProviderID, providerID(sm)))
	}
	if err := labelCluster(ctx, wc, node, cluster); err != nil {
		return notRegistered(fmt.Errorf("labelling Node %s with its Cluster: %w", name, err))
	}
	// Only the status, once registered: the Node's labels then belong to
	// the machine's node agent, which swaps the payload's on an in-place
	// update (agent_update.go), and the kubelet version follows the
	// Machine's spec.version, which the controller sets after one.
	failing, failIn := failedByPayload(sm, r.now()) // failmarker.go
	if status, changed := nodeStatus(node.Status, sm, machine, !k.unhealthy && !failing, r.now()); changed {
		before := node.DeepCopy()
		node.Status = status
		if err := wc.Status().Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return notRegistered(fmt.Errorf("writing the status of Node %s: %w", name, err))
		}
	}
	r.backoff.forget(sm.UID)

	sm.Spec.ProviderID = providerID(sm)
	sm.Status.Addresses = addresses(sm)
	sm.Status.NodeName = name
	sm.Status.Initialization.Provisioned = ptr.To(true)
	r.reportBoot(sm, bootStep{reason: simv1.ReasonBooted,
		message: fmt.Sprintf("booted payload %s; Node %s is registered", payload.Short(sm.Status.BootedPayload), name)})
	switch {
	case k.unhealthy:
		r.reportHealth(sm, false, fmt.Sprintf("Node %s is NotReady: the machine is told to be unhealthy (spec.unhealthy or annotation %s)", name, simv1.AnnotationUnhealthy))
	case failing:
		r.reportHealth(sm, false, fmt.Sprintf("Node %s is NotReady: its payload carries %s", name, FailAfterPath))
	default:
		r.reportHealth(sm, true, fmt.Sprintf("Node %s is Ready", name))
	}
	return ctrl.Result{RequeueAfter: failIn}, nil
}

// deleteNode deletes the machine's Node. When the workload cluster cannot
// be reached (its Cluster is going away), it leaves the Node to Cluster
// API, which deletes the Nodes of deleted Machines itself.
func (r *machineReconciler) deleteNode(ctx context.Context, sm *simv1.SimMachine, cluster client.ObjectKey) error {
	log := ctrl.LoggerFrom(ctx)
	if cluster.Name == "" {
		log.Info("The SimMachine names no Cluster, leaving its Node to Cluster API", "node", sm.Status.NodeName)
		return nil
	}
	wc, err := r.workload.GetClient(ctx, cluster)
	if err != nil {
		log.Info("Cannot reach the workload cluster, leaving the Node to Cluster API", "node", sm.Status.NodeName, "reason", err.Error())
		return nil
	}
	node := &corev1.Node{}
	if err := wc.Get(ctx, client.ObjectKey{Name: sm.Status.NodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if node.Spec.ProviderID != providerID(sm) {
		return nil
	}
	if err := wc.Delete(ctx, node, client.Preconditions{UID: &node.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting Node %s: %w", node.Name, err)
	}
	log.Info("Deleted Node", "node", node.Name)
	r.recorder.Eventf(sm, nil, corev1.EventTypeNormal, "NodeDeleted", "Delete", "Deleted Node %s", node.Name)
	return nil
}

// newNode is the Node a machine's kubelet registers: the labels its payload
// sets (and the well-known ones a kubelet adds), the payload hash it booted,
// its providerID. Status is written separately (nodeStatus).
func newNode(sm *simv1.SimMachine, cluster client.ObjectKey) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:           hostname(sm),
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelInstanceTypeStable: "sim",
	}
	maps.Copy(labels, sm.Status.NodeLabels)
	// Its Cluster's view holds it by these (cluster_view.go).
	labels[simv1.LabelClusterNamespace], labels[simv1.LabelClusterName] = cluster.Namespace, cluster.Name
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName(sm),
			Labels:      labels,
			Annotations: map[string]string{nodepoolv1.AnnotationBootedPayload: sm.Status.BootedPayload},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID(sm)},
	}
}

// nodeStatus returns the status a Node should have, starting from its
// current one, and whether it differs. Ready follows healthy; the pressure
// conditions are always False (Cluster API counts a Node healthy only
// then); kubeletVersion is exactly the Machine's version (or the Machine
// never counts as up to date).
func nodeStatus(current corev1.NodeStatus, sm *simv1.SimMachine, machine *clusterv1.Machine, healthy bool, now time.Time) (corev1.NodeStatus, bool) {
	cpus := int64(sm.Spec.CPUs)
	if cpus == 0 {
		cpus = defaultCPUs
	}
	memory := resource.MustParse(defaultMemory)
	if sm.Spec.Memory != nil {
		memory = *sm.Spec.Memory
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(cpus, resource.DecimalSI),
		corev1.ResourceMemory:           memory,
		corev1.ResourcePods:             *resource.NewQuantity(maxPods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse(diskSize),
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if !healthy {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: fmt.Sprintf("the simulated machine is unhealthy (spec.unhealthy or annotation %s)", simv1.AnnotationUnhealthy)}
	}
	want := []corev1.NodeCondition{
		ready,
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	}
	id := strings.ReplaceAll(string(sm.UID), "-", "")
	status := *current.DeepCopy()
	status.Capacity, status.Allocatable = capacity, capacity.DeepCopy()
	status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: internalIP(sm)},
		{Type: corev1.NodeHostName, Address: hostname(sm)},
	}
	status.NodeInfo = corev1.NodeSystemInfo{
		MachineID: id, SystemUUID: string(sm.UID), BootID: string(sm.UID),
		KernelVersion: kernelVersion, OSImage: osImage, ContainerRuntimeVersion: runtimeName,
		KubeletVersion: machine.Spec.Version, OperatingSystem: "linux", Architecture: "amd64",
	}
	changed := !equalStatus(current, status)
	status.Conditions = nil
	for _, w := range want {
		w.LastHeartbeatTime, w.LastTransitionTime = metav1.NewTime(now), metav1.NewTime(now)
		if c := findNodeCondition(current.Conditions, w.Type); c != nil {
			if c.Status == w.Status {
				w.LastTransitionTime = c.LastTransitionTime
			}
			if c.Status == w.Status && c.Reason == w.Reason && c.Message == w.Message {
				w.LastHeartbeatTime = c.LastHeartbeatTime
			} else {
				changed = true
			}
		} else {
			changed = true
		}
		status.Conditions = append(status.Conditions, w)
	}
	for _, c := range current.Conditions {
		if findNodeCondition(want, c.Type) == nil {
			status.Conditions = append(status.Conditions, c)
		}
	}
	return status, changed
}

func findNodeCondition(cs []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// equalStatus compares what nodeStatus sets besides conditions.
func equalStatus(a, b corev1.NodeStatus) bool {
	if a.NodeInfo != b.NodeInfo || len(a.Addresses) != len(b.Addresses) || len(a.Capacity) != len(b.Capacity) || len(a.Allocatable) != len(b.Allocatable) {
		return false
	}
	for i := range a.Addresses {
		if a.Addresses[i] != b.Addresses[i] {
			return false
		}
	}
	for k, v := range b.Capacity {
		if q, ok := a.Capacity[k]; !ok || q.Cmp(v) != 0 {
			return false
		}
	}
	for k, v := range b.Allocatable {
		if q, ok := a.Allocatable[k]; !ok || q.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

// labelCluster labels a Node registered before Nodes carried their
// Cluster's labels (a resumed dev environment) with them, so its Cluster's
// view holds it.
func labelCluster(ctx context.Context, wc client.Client, node *corev1.Node, cluster client.ObjectKey) error {
	if node.Labels[simv1.LabelClusterNamespace] == cluster.Namespace && node.Labels[simv1.LabelClusterName] == cluster.Name {
		return nil
	}
	before := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[simv1.LabelClusterNamespace], node.Labels[simv1.LabelClusterName] = cluster.Namespace, cluster.Name
	return wc.Patch(ctx, node, client.MergeFrom(before))
}
