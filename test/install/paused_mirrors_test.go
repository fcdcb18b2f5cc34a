package install

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/secrets"
)

// TestAPausedPoolDoesNotKeepThePayloadServerUnready: with no mirrors
// marker yet (a fresh install, or the first upgrade to mirrors), a pool
// whose Cluster is paused (spec.paused, as `clusterctl move` leaves it) and
// one whose NodePool carries Cluster API's paused annotation are not
// reconciled, so never mirrored. The controller starts, mirrors the other
// pools and writes the marker anyway: the payload server becomes ready, and
// another pool boots and scales up from the mirrors. The paused pools are
// left as they were.
func TestAPausedPoolDoesNotKeepThePayloadServerUnready(t *testing.T) {
	ctx := context.Background()
	marker := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: secrets.MirrorsReadyName}}
	if err := env.Client.Delete(ctx, marker); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	moving := newPool(t, 1, 0)
	cluster := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: moving.Namespace, Name: moving.Spec.ClusterName}, cluster); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	held := newPool(t, 1, 0)
	if err := env.Client.Patch(ctx, held, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":""}}}`))); err != nil {
		t.Fatal(err)
	}

	// The controller first, then the payload server, which must become
	// ready (startDeployment waits for its readiness probe).
	startDeployment(t, controllerName)
	startDeployment(t, payloadName)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.Secret{}); err != nil {
		t.Fatalf("the payload server is ready, the marker: %v", err)
	}

	p := newPool(t, 1, 0)
	waitFor(t, p, "1 ready node that fetched its payload", func(s state) bool {
		return settled(1)(s) && meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
	})
	scale(t, p, 2)
	waitFor(t, p, "2 ready nodes", settled(2))

	for _, q := range []*nodepoolv1.NodePool{moving, held} {
		s := observe(t, q)
		c := meta.FindStatusCondition(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
		if s.machines.Len() != 0 || c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("paused pool %s/%s: %s; want nothing done", q.Namespace, q.Name, s)
		}
	}
	checkReplicas(t)
}
