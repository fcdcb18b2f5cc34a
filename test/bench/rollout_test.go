package bench

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// runRolloutComparison rolls 3 machines of a NodePool (a user config
// edit) and, at the same moment, 3 machines of a bare MachineDeployment
// over the same template, surge (1, 0 unavailable) and provider (new
// bootstrap data), and returns how long each took to be complete.
func runRolloutComparison(b *testing.B, bin, dir string) map[string]float64 {
	ctx := context.Background()
	f, ps := startFleetEnv(b, bin, dir, true)
	c := f.c
	const ns = "rollout"
	poolNamespace(b, c, ns)
	waitUntil(b, time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret.Name("c1", secret.Kubeconfig)}, &corev1.Secret{}) == nil
	})
	p := f.start(b)
	defer p.stop()

	must(b, c.Create(ctx, fleetPool(ns, "pool", 3, false)))
	boot1, err := ps.CreateBoot(ctx, c, ns, "c1", "bare", "v1")
	must(b, err)
	must(b, c.Create(ctx, simtest.MachineDeployment(ns, "c1", "bare", "small", boot1.UserData, 3)))
	waitUntil(b, 10*time.Minute, func() bool {
		pool := &nodepoolv1.NodePool{}
		must(b, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool))
		return meta.IsStatusConditionTrue(pool.Status.Conditions, nodepoolv1.ConditionReady) && complete(b, c, ns, "pool", "") && complete(b, c, ns, "bare", "")
	})
	boot2, err := ps.CreateBoot(ctx, c, ns, "c1", "bare", "v2")
	must(b, err)
	old := map[string]string{}
	for _, name := range []string{"pool", "bare"} {
		md := &clusterv1.MachineDeployment{}
		must(b, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md))
		old[name] = ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	}

	start := time.Now()
	must(b, c.Update(ctx, withVersion(b, c, chrony(ns, "ntp2"))))
	bare := &clusterv1.MachineDeployment{}
	must(b, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bare"}, bare))
	patch := client.MergeFrom(bare.DeepCopy())
	bare.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(boot2.UserData)
	must(b, c.Patch(ctx, bare, patch))
	took := map[string]float64{}
	waitUntil(b, 20*time.Minute, func() bool {
		for _, name := range []string{"pool", "bare"} {
			if _, done := took[name]; !done && complete(b, c, ns, name, old[name]) {
				took[name] = time.Since(start).Seconds()
			}
		}
		return len(took) == 2
	})
	r := map[string]float64{"nodepoolSeconds": took["pool"], "bareSeconds": took["bare"], "ratio": took["pool"] / took["bare"]}
	b.Logf("3-machine rollout: nodepool %.1f s, bare MachineDeployment %.1f s", took["pool"], took["bare"])
	return r
}

// complete reports whether a MachineDeployment's rollout is done: it runs
// exactly 3 Running machines with a Node, every one booted from its
// current bootstrap data (and, unless old is "", that is no longer old).
func complete(b *testing.B, c client.Client, ns, name, old string) bool {
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, md); err != nil {
		return false
	}
	data := ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	if old != "" && data == old {
		return false
	}
	machines := &clusterv1.MachineList{}
	must(b, c.List(context.Background(), machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name}))
	if len(machines.Items) != 3 {
		return false
	}
	for _, m := range machines.Items {
		if ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") != data || m.Status.Phase != string(clusterv1.MachinePhaseRunning) ||
			!m.Status.NodeRef.IsDefined() || !m.DeletionTimestamp.IsZero() {
			return false
		}
	}
	return true
}

func waitUntil(b *testing.B, timeout time.Duration, ok func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("timed out after %s", timeout)
}
