package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func TestANodeTurningReadyOrNotWakesItsPool(t *testing.T) {
	node := func(ready corev1.ConditionStatus, annotations map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: annotations}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	updating := map[string]string{nodepoolv1.AnnotationUpdatePhase: "Draining"}
	for _, tc := range []struct {
		name     string
		old, new *corev1.Node
		wakes    bool
	}{
		{"turns Ready", node(corev1.ConditionFalse, nil), node(corev1.ConditionTrue, nil), true},
		{"first reports Ready", node("", nil), node(corev1.ConditionTrue, nil), true},
		{"stops being Ready", node(corev1.ConditionTrue, nil), node(corev1.ConditionFalse, nil), true},
		{"stops reporting", node(corev1.ConditionTrue, nil), node(corev1.ConditionUnknown, nil), true},
		{"a heartbeat", node(corev1.ConditionTrue, nil), node(corev1.ConditionTrue, nil), false},
		{"being updated in place", node(corev1.ConditionTrue, nil), node(corev1.ConditionTrue, updating), true},
	} {
		if got := nodeWakesPool(tc.old, tc.new); got != tc.wakes {
			t.Errorf("%s: wakes %v, want %v", tc.name, got, tc.wakes)
		}
	}
}
