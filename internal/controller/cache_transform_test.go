package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestTheCacheKeepsClusterAPIObjectsWithoutTheirDeprecatedStatus(t *testing.T) {
	opts := CacheOptions()
	managed := []metav1.ManagedFieldsEntry{{Manager: "capi", Operation: metav1.ManagedFieldsOperationUpdate}}
	ready := metav1.Condition{Type: clusterv1.MachineDeploymentAvailableCondition, Status: metav1.ConditionTrue, Reason: "Available"}
	objs := []client.Object{
		&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", ManagedFields: managed},
			Status: clusterv1.MachineDeploymentStatus{Replicas: ptr.To[int32](3), Conditions: []metav1.Condition{ready},
				Deprecated: &clusterv1.MachineDeploymentDeprecatedStatus{V1Beta1: &clusterv1.MachineDeploymentV1Beta1DeprecatedStatus{UpdatedReplicas: 3}}}},
		&clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "ms", ManagedFields: managed},
			Status: clusterv1.MachineSetStatus{Replicas: ptr.To[int32](3), Conditions: []metav1.Condition{ready},
				Deprecated: &clusterv1.MachineSetDeprecatedStatus{V1Beta1: &clusterv1.MachineSetV1Beta1DeprecatedStatus{FullyLabeledReplicas: 3}}}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", ManagedFields: managed},
			Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{ready}, NodeRef: clusterv1.MachineNodeReference{Name: "n"},
				Deprecated: &clusterv1.MachineDeprecatedStatus{V1Beta1: &clusterv1.MachineV1Beta1DeprecatedStatus{FailureMessage: ptr.To("gone")}}}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: managed},
			Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{ready},
				Deprecated: &clusterv1.ClusterDeprecatedStatus{V1Beta1: &clusterv1.ClusterV1Beta1DeprecatedStatus{FailureMessage: ptr.To("gone")}}}},
	}
	for _, obj := range objs {
		var transform func(any) (any, error)
		for k, by := range opts.ByObject {
			if fmt.Sprintf("%T", k) == fmt.Sprintf("%T", obj) {
				transform = by.Transform
			}
		}
		if transform == nil {
			t.Fatalf("%T: the cache has no transform for it", obj)
		}
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		o := out.(client.Object)
		if len(o.GetManagedFields()) != 0 {
			t.Errorf("%T kept its managedFields", o)
		}
		var deprecated bool
		var conditions int
		switch o := o.(type) {
		case *clusterv1.MachineDeployment:
			deprecated, conditions = o.Status.Deprecated != nil, len(o.Status.Conditions)
			if ptr.Deref(o.Status.Replicas, 0) != 3 {
				t.Errorf("the MachineDeployment lost status.replicas")
			}
		case *clusterv1.MachineSet:
			deprecated, conditions = o.Status.Deprecated != nil, len(o.Status.Conditions)
		case *clusterv1.Machine:
			deprecated, conditions = o.Status.Deprecated != nil, len(o.Status.Conditions)
			if o.Status.NodeRef.Name != "n" {
				t.Errorf("the Machine lost its node")
			}
		case *clusterv1.Cluster:
			deprecated, conditions = o.Status.Deprecated != nil, len(o.Status.Conditions)
		}
		if deprecated {
			t.Errorf("%T kept status.deprecated", o)
		}
		if conditions != 1 {
			t.Errorf("%T has %d conditions, want the 1 it had", o, conditions)
		}
	}
}
