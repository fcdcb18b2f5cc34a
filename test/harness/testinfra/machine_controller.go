package testinfra

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const finalizer = "test.nodepool.dev/node"

// MachineReconciler turns a TestMachine into a Node as soon as its Machine
// has bootstrap data: providerID, provisioned status, a Ready Node with the
// Machine's kubelet version. Deleting the TestMachine deletes the Node.
type MachineReconciler struct {
	Client client.Client
}

// SetupWithManager registers the reconciler.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK(KindMachine))
	return ctrl.NewControllerManagedBy(mgr).Named("testmachine").For(u).
		Watches(&clusterv1.Machine{}, machineToInfra()).Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tm := &unstructured.Unstructured{}
	tm.SetGroupVersionKind(GVK(KindMachine))
	if err := r.Client.Get(ctx, req.NamespacedName, tm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nodeName := req.Namespace + "-" + req.Name
	if !tm.GetDeletionTimestamp().IsZero() {
		err := r.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(tm, finalizer)
		return ctrl.Result{}, r.Client.Update(ctx, tm)
	}
	machine, err := owningMachine(ctx, r.Client, tm)
	if err != nil || machine == nil || machine.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(tm, finalizer) {
		if err := r.Client.Update(ctx, tm); err != nil {
			return ctrl.Result{}, err
		}
	}
	providerID := fmt.Sprintf("test://%s/%s", req.Namespace, req.Name)
	if id, _, _ := unstructured.NestedString(tm.Object, "spec", "providerID"); id != providerID {
		_ = unstructured.SetNestedField(tm.Object, providerID, "spec", "providerID")
		if err := r.Client.Update(ctx, tm); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.ensureNode(ctx, nodeName, providerID, machine); err != nil {
		return ctrl.Result{}, err
	}
	if ok, _, _ := unstructured.NestedBool(tm.Object, "status", "initialization", "provisioned"); !ok {
		_ = unstructured.SetNestedField(tm.Object, true, "status", "initialization", "provisioned")
		return ctrl.Result{}, r.Client.Status().Update(ctx, tm)
	}
	return ctrl.Result{}, nil
}

func (r *MachineReconciler) ensureNode(ctx context.Context, name, providerID string, m *clusterv1.Machine) error {
	node := &corev1.Node{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node)
	if apierrors.IsNotFound(err) {
		node = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"test.nodepool.dev/data-secret": *m.Spec.Bootstrap.DataSecretName}},
			Spec:       corev1.NodeSpec{ProviderID: providerID},
		}
		if err := r.Client.Create(ctx, node); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if len(node.Status.Conditions) > 0 {
		return nil
	}
	now := metav1.Now()
	node.Status.NodeInfo.KubeletVersion = m.Spec.Version
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
	}
	return r.Client.Status().Update(ctx, node)
}
