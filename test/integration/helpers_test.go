package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/test/stack"
)

// The helpers both end-to-end suites use (pools, their state, waits,
// history) are in test/stack; these are this suite's own.

func scale(t *testing.T, p *nodepoolv1.NodePool, n int32) {
	t.Helper()
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(n) })
}

// nodesMatch reports whether every node of the pool's machines satisfies ok.
func nodesMatch(t *testing.T, p *nodepoolv1.NodePool, ok func(*corev1.Node) bool) bool {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := env.Client.List(context.Background(), ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Items {
		n := &corev1.Node{}
		if !m.Status.NodeRef.IsDefined() || env.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, n) != nil || !ok(n) {
			return false
		}
	}
	return len(ms.Items) > 0
}

// withMirrors runs the controller with mirrors, as released: it copies
// each pool's token and payload Secrets into nodepool-system, where the
// payload server reads them, and returns those settings. The test's
// cleanup restores the stack's settings.
func withMirrors(t *testing.T) controller.Settings {
	t.Helper()
	mirrored := settings
	mirrored.MirrorNamespace = stack.ManagementNamespace
	st.MustRestartController(t, mirrored)
	t.Cleanup(func() { st.MustRestartController(t, settings) })
	return mirrored
}
