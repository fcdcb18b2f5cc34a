package install

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// The shipped controller, as its ServiceAccount (least-privilege RBAC, the
// admission policy refusing spec changes), runs a fleet rollout: it selects
// the pool, triggers it by its annotations and sees it complete.
func TestAFleetRolloutRunsAsTheControllersServiceAccount(t *testing.T) {
	ctx := context.Background()
	startDeployment(t, controllerName)
	startDeployment(t, payloadName)
	p := newPool(t, 1, 0)
	before := waitFor(t, p, "1 ready node", settled(1))
	label := p.Namespace // unique to this test
	pool := &nodepoolv1.NodePool{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), pool); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Labels = map[string]string{"fleet": label}
	if err := env.Client.Patch(ctx, pool, patch); err != nil {
		t.Fatal(err)
	}
	fr := &nodepoolv1.FleetRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "install-" + label},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": label}},
			Action:       nodepoolv1.FleetActionRestart,
			Waves:        []intstr.IntOrString{intstr.FromString("100%")},
		},
	}
	if err := env.Client.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, fr) })
	got := stack.WaitFor(t, timeout, "the fleet rollout complete", func() *nodepoolv1.FleetRollout {
		checkReplicas(t)
		out := &nodepoolv1.FleetRollout{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fr), out); err != nil {
			t.Fatal(err)
		}
		return out
	}, func(fr *nodepoolv1.FleetRollout) bool { return fr.Status.Phase == nodepoolv1.FleetPhaseComplete },
		func(fr *nodepoolv1.FleetRollout) string { return string(fr.Status.Phase) + ": " + fr.Status.Message })
	if sp := stack.FleetPoolsAgreeing(t, env.Client, got); len(sp) != 1 || sp[0].State != nodepoolv1.FleetPoolDone {
		t.Fatalf("status %+v", got.Status)
	}
	s := waitFor(t, p, "the machine replaced", func(s state) bool {
		return settled(1)(s) && !s.machines.HasAny(sets.List(before.machines)...)
	})
	var found bool
	for _, cr := range revisions(t, p) {
		if e, err := history.Decode(&cr); err == nil && e.Initiator == nodepoolv1.FleetRolloutInitiator(fr.Name) && e.Outcome == history.OutcomeComplete {
			found = true
		}
	}
	if !found {
		t.Fatalf("no complete record with initiator %s: %s", nodepoolv1.FleetRolloutInitiator(fr.Name), s)
	}
}
