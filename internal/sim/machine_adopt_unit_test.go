package sim

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

type oneWorkload struct{ c client.Client }

func (w oneWorkload) GetClient(context.Context, client.ObjectKey) (client.Client, error) {
	return w.c, nil
}

// adoptFixture: a SimMachine as the cache may hold it (providerID, no
// status), the API server's copy with status, and its registered Node
// carrying the kubelet's, the payload's and a person's labels.
func adoptFixture(t *testing.T, liveStatus simv1.SimMachineStatus) (*machineReconciler, *simv1.SimMachine) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := simv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sm := &simv1.SimMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}}}
	sm.Spec.ProviderID = providerID(sm)
	live := sm.DeepCopy()
	live.Status = liveStatus
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(sm), Annotations: map[string]string{nodepoolv1.AnnotationBootedPayload: "b00ted"},
			Labels: map[string]string{
				corev1.LabelHostname: "m1", corev1.LabelOSStable: "linux", "team.example.com/owner": "blue",
				nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "b00ted",
			}},
		Spec: corev1.NodeSpec{ProviderID: providerID(sm)},
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).WithStatusSubresource(live).Build()
	nodes := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node).Build()
	return &machineReconciler{reader: api, workload: oneWorkload{nodes}}, sm
}

// A SimMachine read from a cache that has its providerID but not yet its
// own status write is not adopted: the API server's status is taken as it
// is, and the Node's kubelet labels never become payload labels (an
// in-place update would remove them).
func TestAdoptTakesTheAPIServersStatusOverAStaleCache(t *testing.T) {
	written := map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "b00ted", "test.nodepool.dev/extra": "x"}
	r, sm := adoptFixture(t, simv1.SimMachineStatus{BootedPayload: "b00ted", NodeLabels: written})
	if err := r.adopt(context.Background(), sm, nil); err != nil {
		t.Fatal(err)
	}
	if sm.Status.BootedPayload != "b00ted" || !maps.Equal(sm.Status.NodeLabels, written) {
		t.Fatalf("status %+v, want the API server's (%v)", sm.Status, written)
	}
}

// A SimMachine that really lacks its status (a move) takes only the
// payload's labels from its Node.
func TestAdoptTakesOnlyThePayloadsLabelsFromTheNode(t *testing.T) {
	r, sm := adoptFixture(t, simv1.SimMachineStatus{})
	if err := r.adopt(context.Background(), sm, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: "b00ted"}
	if sm.Status.BootedPayload != "b00ted" || !maps.Equal(sm.Status.NodeLabels, want) {
		t.Fatalf("status %+v, want payload b00ted and labels %v", sm.Status, want)
	}
}
