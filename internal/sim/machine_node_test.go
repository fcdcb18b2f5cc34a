package sim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestNewNodeCarriesThePayloadsIdentity(t *testing.T) {
	sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", UID: "u1"}}
	sm.Status.BootedPayload = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sm.Status.NodeLabels = map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "0123456789abcdef", corev1.LabelHostname: "from-payload"}
	n := newNode(sm, client.ObjectKey{Namespace: "ns", Name: "c1"})
	if n.Name != "m1.ns" || n.Spec.ProviderID != "sim://ns/m1" {
		t.Fatalf("name %q providerID %q", n.Name, n.Spec.ProviderID)
	}
	if n.Labels[nodepoolv1.LabelPool] != "workers" || n.Labels[nodepoolv1.LabelPayload] != "0123456789abcdef" || n.Labels[corev1.LabelOSStable] != "linux" {
		t.Fatalf("labels %v", n.Labels)
	}
	if n.Labels[simv1.LabelClusterNamespace] != "ns" || n.Labels[simv1.LabelClusterName] != "c1" {
		t.Fatalf("the Node does not name its Cluster: %v", n.Labels)
	}
	if n.Labels[corev1.LabelHostname] != "from-payload" {
		t.Fatalf("the payload's labels must win over the kubelet's defaults: %v", n.Labels)
	}
	if n.Annotations[nodepoolv1.AnnotationBootedPayload] != sm.Status.BootedPayload {
		t.Fatalf("annotations %v", n.Annotations)
	}
}

func TestNodeStatus(t *testing.T) {
	mem := resource.MustParse("16Gi")
	sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", UID: "u-1"}, Spec: simv1.SimMachineSpec{CPUs: 8, Memory: &mem}}
	m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{Version: "v1.36.3"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	s, changed := nodeStatus(corev1.NodeStatus{}, sm, m, true, t0)
	if !changed {
		t.Fatal("an empty status must change")
	}
	want := map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
	}
	checkConditions := func(s corev1.NodeStatus, want map[corev1.NodeConditionType]corev1.ConditionStatus) {
		t.Helper()
		if len(s.Conditions) != len(want) {
			t.Fatalf("conditions %+v", s.Conditions)
		}
		for _, c := range s.Conditions {
			if want[c.Type] != c.Status {
				t.Fatalf("condition %s is %s, want %s", c.Type, c.Status, want[c.Type])
			}
		}
	}
	checkConditions(s, want)
	if s.NodeInfo.KubeletVersion != "v1.36.3" || s.Capacity.Cpu().Value() != 8 || s.Capacity.Memory().Cmp(mem) != 0 || s.Allocatable.Pods().Value() != maxPods {
		t.Fatalf("nodeInfo %+v capacity %v allocatable %v", s.NodeInfo, s.Capacity, s.Allocatable)
	}

	if _, changed := nodeStatus(s, sm, m, true, t0.Add(time.Hour)); changed {
		t.Fatal("the same machine must not rewrite its Node's status")
	}

	sick, changed := nodeStatus(s, sm, m, false, t0.Add(time.Hour))
	if !changed {
		t.Fatal("turning unhealthy must change the status")
	}
	want[corev1.NodeReady] = corev1.ConditionFalse
	checkConditions(sick, want)
	for _, c := range sick.Conditions {
		moved := c.LastTransitionTime.Time.Equal(t0.Add(time.Hour))
		if (c.Type == corev1.NodeReady) != moved {
			t.Fatalf("condition %s transition time %s: only Ready moved", c.Type, c.LastTransitionTime)
		}
	}

	m.Spec.Version = "v1.36.4"
	if up, changed := nodeStatus(sick, sm, m, false, t0); !changed || up.NodeInfo.KubeletVersion != "v1.36.4" {
		t.Fatal("the kubelet version must follow the Machine's")
	}

	defaults, _ := nodeStatus(corev1.NodeStatus{}, &simv1.SimMachine{}, m, true, t0)
	if defaults.Capacity.Cpu().Value() != defaultCPUs || defaults.Capacity.Memory().String() != defaultMemory {
		t.Fatalf("default capacity %v", defaults.Capacity)
	}
}
