package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestLabelsAndTaintsFollowTheSpecAndLeaveOthersAlone(t *testing.T) {
	pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{
		NodeLabels: map[string]nodepoolv1.LabelValue{"example.com/role": "db"},
		Taints:     []nodepoolv1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: "NoSchedule"}},
	}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: "NoSchedule"}}},
	}
	if !applyLabelsAndTaints(node, pool) {
		t.Fatal("no change reported")
	}
	if node.Labels["example.com/role"] != "db" || node.Labels["kubernetes.io/hostname"] != "n1" || len(node.Spec.Taints) != 2 {
		t.Fatalf("labels %v taints %v", node.Labels, node.Spec.Taints)
	}
	if applyLabelsAndTaints(node, pool) {
		t.Error("a second pass must change nothing")
	}
	pool.Spec.NodeLabels, pool.Spec.Taints = nil, nil
	if !applyLabelsAndTaints(node, pool) {
		t.Fatal("removal not reported")
	}
	if _, ok := node.Labels["example.com/role"]; ok || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "node.kubernetes.io/not-ready" {
		t.Fatalf("after removal: labels %v taints %v", node.Labels, node.Spec.Taints)
	}
}

func TestReservedNodeLabelsAreNeverWrittenOrRemoved(t *testing.T) {
	pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{
		NodeLabels: map[string]nodepoolv1.LabelValue{nodepoolv1.LabelPayload: "fake", nodepoolv1.LabelPool: "other"},
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Labels: map[string]string{nodepoolv1.LabelPayload: "abc123", nodepoolv1.LabelPool: "workers"},
		// A pool stored before the API refused reserved keys made nodepool
		// record them as its own.
		Annotations: map[string]string{annotationManagedLabels: nodepoolv1.LabelPayload + "," + nodepoolv1.LabelPool},
	}}
	applyLabelsAndTaints(node, pool)
	if node.Labels[nodepoolv1.LabelPayload] != "abc123" || node.Labels[nodepoolv1.LabelPool] != "workers" {
		t.Fatalf("reserved labels overwritten: %v", node.Labels)
	}
	pool.Spec.NodeLabels = nil
	applyLabelsAndTaints(node, pool)
	if node.Labels[nodepoolv1.LabelPayload] != "abc123" || node.Labels[nodepoolv1.LabelPool] != "workers" {
		t.Fatalf("reserved labels removed with the spec's: %v", node.Labels)
	}
}
