package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	observepkg "nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// TestAChangedInputIsNeverServedFromTheRenderCache edits each kind of input
// of a settled pool (its user config's content, the infrastructure
// template, the management config) and checks that what the controller
// acts on matches a render from scratch of the inputs as they are.
func TestAChangedInputIsNeverServedFromTheRenderCache(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "cached", 0)
	key := client.ObjectKeyFromObject(p)
	// fresh renders the pool's inputs now, uncached.
	fresh := func() rollout.Input {
		pool := &nodepoolv1.NodePool{}
		if err := env.Client.Get(ctx, key, pool); err != nil {
			t.Fatal(err)
		}
		var in rollout.Input
		if _, err := observepkg.Latest(ctx, env.Client, pool, settings.Inputs, &in); err != nil || in.RenderErr != nil {
			t.Fatalf("rendering from scratch: %v %v", err, in.RenderErr)
		}
		return in
	}
	// acted reports whether the MachineDeployment follows the render.
	follows := func(want rollout.Input) (bool, string) {
		md := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, key, md); err != nil {
			return false, err.Error()
		}
		data := ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
		tmpl := md.Spec.Template.Spec.InfrastructureRef.Name
		return data == secrets.UserDataSecretName(p.Name, want.Hashes.Rollout) && tmpl == want.TemplateName,
			fmt.Sprintf("MachineDeployment on %s and %s; a render gives %s and %s", data, tmpl, secrets.UserDataSecretName(p.Name, want.Hashes.Rollout), want.TemplateName)
	}
	wait := func(what string, want rollout.Input) {
		t.Helper()
		last := ""
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			ok, desc := follows(want)
			if ok {
				return
			}
			last = desc
			time.Sleep(stack.PollInterval)
		}
		t.Fatalf("%s: %s", what, last)
	}
	first := fresh()
	wait("a new pool", first)
	// Several resyncs of the settled pool (the stack resyncs every 3 s).
	time.Sleep(3 * settings.ResyncPeriod)
	wait("settled", first)

	cm := stack.ConfigMap(p.Namespace, "chrony", "")
	stack.Update(t, env.Client, cm, func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("time2.corp.example") })
	edited := fresh()
	if edited.Hashes.Rollout == first.Hashes.Rollout {
		t.Fatal("the edit did not change the rollout hash")
	}
	wait("a user config edit", edited)

	tmpl := &simv1.SimMachineTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: "small"}, tmpl); err != nil {
		t.Fatal(err)
	}
	stack.Update(t, env.Client, tmpl, func(m *simv1.SimMachineTemplate) { m.Spec.Template.Spec.CPUs = 8 })
	retemplated := fresh()
	if retemplated.TemplateName == edited.TemplateName {
		t.Fatal("the template edit did not change the clone name")
	}
	wait("a template edit", retemplated)

	was := stack.ManagementConfig("")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(was), was); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.SetManagementConfig(t, func(string) string { return was.Data[inputs.ManagementConfigKey] }) })
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	bumped := fresh()
	if bumped.Hashes.Payload == retemplated.Hashes.Payload || bumped.Hashes.Rollout != retemplated.Hashes.Rollout {
		t.Fatal("the bump did not change the payload alone")
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pool := &nodepoolv1.NodePool{}
		if err := env.Client.Get(ctx, key, pool); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionConfigUpdatePending)
		if c != nil && c.Status == "True" && c.ObservedGeneration == pool.Generation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a management bump: no pending drift reported; conditions %s", stack.Conditions(pool))
		}
		time.Sleep(stack.PollInterval)
	}
	wait("a management bump (rolls nothing)", bumped)
}
