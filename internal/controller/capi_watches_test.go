package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestOnlyChangesToWhatAPoolReadsOfClusterAPIObjectsWakeIt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	md := func(edit func(*clusterv1.MachineDeployment)) client.Object {
		o := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2, ResourceVersion: "10"},
			Spec:   clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](3)},
			Status: clusterv1.MachineDeploymentStatus{ObservedGeneration: 2, Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](3), UpToDateReplicas: ptr.To[int32](3)}}
		o.Status.Conditions = []metav1.Condition{{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: at}}
		if edit != nil {
			edit(o)
		}
		return o
	}
	ms := func(edit func(*clusterv1.MachineSet)) client.Object {
		o := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "p-x", Generation: 1},
			Spec:   clusterv1.MachineSetSpec{Replicas: ptr.To[int32](3)},
			Status: clusterv1.MachineSetStatus{ObservedGeneration: 1, Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](3)}}
		if edit != nil {
			edit(o)
		}
		return o
	}
	machine := func(edit func(*clusterv1.Machine)) client.Object {
		o := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "p-x-1", Labels: map[string]string{nodepoolv1.LabelPool: "p"}},
			Spec: clusterv1.MachineSpec{Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("p-userdata-1")}, Version: "v1.36.3"}}
		o.Status.NodeRef = clusterv1.MachineNodeReference{Name: "n1"}
		o.Status.Phase = "Running"
		o.Status.Conditions = []metav1.Condition{
			{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionTrue, Reason: "NodeReady", LastTransitionTime: at},
			{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: at},
		}
		if edit != nil {
			edit(o)
		}
		return o
	}
	for _, tc := range []struct {
		name     string
		old, new client.Object
		wakes    bool
	}{
		{"MachineDeployment: only its resourceVersion", md(nil), md(func(o *clusterv1.MachineDeployment) { o.ResourceVersion = "11" }), false},
		{"MachineDeployment: available replicas", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.AvailableReplicas = ptr.To[int32](2) }), false},
		{"MachineDeployment: a condition's message", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.Conditions[0].Message = "3 available" }), false},
		{"MachineDeployment: its phase", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.Phase = "Running" }), false},
		{"MachineDeployment: ready replicas", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.ReadyReplicas = ptr.To[int32](2) }), true},
		{"MachineDeployment: up-to-date replicas", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.UpToDateReplicas = ptr.To[int32](1) }), true},
		{"MachineDeployment: replicas", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.Replicas = ptr.To[int32](4) }), true},
		{"MachineDeployment: observed generation", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Status.ObservedGeneration = 1 }), true},
		{"MachineDeployment: its spec", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Spec.Replicas = ptr.To[int32](5) }), true},
		{"MachineDeployment: an annotation", md(nil), md(func(o *clusterv1.MachineDeployment) { o.Annotations = map[string]string{"a": "b"} }), true},
		{"MachineDeployment: deleted", md(nil), md(func(o *clusterv1.MachineDeployment) { o.DeletionTimestamp = &later }), true},
		{"MachineSet: its conditions", ms(nil), ms(func(o *clusterv1.MachineSet) {
			o.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: later}}
		}), false},
		{"MachineSet: available replicas", ms(nil), ms(func(o *clusterv1.MachineSet) { o.Status.AvailableReplicas = ptr.To[int32](1) }), false},
		{"MachineSet: replicas", ms(nil), ms(func(o *clusterv1.MachineSet) { o.Status.Replicas = ptr.To[int32](2) }), true},
		{"MachineSet: ready replicas", ms(nil), ms(func(o *clusterv1.MachineSet) { o.Status.ReadyReplicas = ptr.To[int32](2) }), true},
		{"MachineSet: its spec", ms(nil), ms(func(o *clusterv1.MachineSet) { o.Spec.Replicas = ptr.To[int32](0) }), true},
		{"MachineSet: its owner", ms(nil), ms(func(o *clusterv1.MachineSet) { o.OwnerReferences = []metav1.OwnerReference{{Name: "p"}} }), true},
		{"Machine: last updated, phase, addresses", machine(nil), machine(func(o *clusterv1.Machine) {
			o.Status.LastUpdated, o.Status.Phase = later, "Provisioned"
			o.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}}
		}), false},
		{"Machine: a condition no pool reads", machine(nil), machine(func(o *clusterv1.Machine) { o.Status.Conditions[1].Message = "all good" }), false},
		{"Machine: its node's readiness", machine(nil), machine(func(o *clusterv1.Machine) { o.Status.Conditions[0].Status = metav1.ConditionFalse }), true},
		{"Machine: the health gate", machine(nil), machine(func(o *clusterv1.Machine) {
			o.Status.Conditions = append(o.Status.Conditions, metav1.Condition{Type: nodepoolv1.HealthGateCondition, Status: metav1.ConditionTrue, LastTransitionTime: later})
		}), true},
		{"Machine: its drain", machine(nil), machine(func(o *clusterv1.Machine) {
			o.Status.Deletion = &clusterv1.MachineDeletionStatus{NodeDrainStartTime: later}
		}), true},
		{"Machine: its node", machine(nil), machine(func(o *clusterv1.Machine) { o.Status.NodeRef = clusterv1.MachineNodeReference{} }), true},
		{"Machine: its bootstrap data", machine(nil), machine(func(o *clusterv1.Machine) { o.Spec.Bootstrap.DataSecretName = ptr.To("p-userdata-2") }), true},
		{"Machine: an annotation (an in-place update's record)", machine(nil), machine(func(o *clusterv1.Machine) {
			o.Annotations = map[string]string{nodepoolv1.AnnotationMachineUserData: "p-userdata-2"}
		}), true},
	} {
		if got := poolReads.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.wakes {
			t.Errorf("%s: wakes the pool %v, want %v", tc.name, got, tc.wakes)
		}
	}
	for _, o := range []client.Object{md(nil), ms(nil), machine(nil)} {
		if !poolReads.Create(event.CreateEvent{Object: o}) || !poolReads.Delete(event.DeleteEvent{Object: o}) {
			t.Errorf("%T: a create or delete does not wake its pool", o)
		}
	}
}
