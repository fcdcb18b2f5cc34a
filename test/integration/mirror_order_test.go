package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/stack"
)

// With mirrors (the payload server reading nodepool-system only, as
// released), a forced rollout's token serves the latest payload in its
// mirror before the MachineDeployment asks Cluster API for new machines:
// a machine that boots at once (no boot delay) fetches the latest payload,
// never the one the token served before. The order is the API server's:
// the mirror's change has a lower resourceVersion than the
// MachineDeployment's rollout.after (one etcd, whose revisions order every
// write).
func TestAForcedRolloutsMirroredTokenServesTheLatestPayloadBeforeMachinesAreMade(t *testing.T) {
	ctx := context.Background()
	withMirrors(t)

	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, stack.RolloutTimeout)
	defer cancel()
	mirrors, err := wc.Watch(wctx, &corev1.SecretList{}, client.InNamespace(stack.ManagementNamespace), client.MatchingLabelsSelector{Selector: secrets.MirrorsOf(p.Namespace, p.Name)})
	if err != nil {
		t.Fatal(err)
	}
	defer mirrors.Stop()
	mds, err := wc.Watch(wctx, &clusterv1.MachineDeploymentList{}, client.InNamespace(p.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer mds.Stop()

	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	// The first event of each: the token mirror serving another payload
	// than the nodes run, and the MachineDeployment carrying rollout.after.
	running := before.OnlyPayload()
	var mirrorRV, mdRV uint64
	served := ""
	for mirrorRV == 0 || mdRV == 0 {
		select {
		case ev, ok := <-mirrors.ResultChan():
			if !ok {
				t.Fatal("the mirrors' watch ended")
			}
			s, isSecret := ev.Object.(*corev1.Secret)
			if !isSecret || ev.Type == watch.Deleted || s.Data[secrets.KeyToken] == nil || mirrorRV != 0 {
				continue
			}
			if h := string(s.Data[secrets.KeyPayloadHash]); payload.PayloadLabelValue(h) != running {
				mirrorRV, served = rv(t, s.ResourceVersion), h
			}
		case ev, ok := <-mds.ResultChan():
			if !ok {
				t.Fatal("the MachineDeployments' watch ended")
			}
			md, isMD := ev.Object.(*clusterv1.MachineDeployment)
			if !isMD || md.Name != p.Name || md.Spec.Rollout.After.IsZero() || mdRV != 0 {
				continue
			}
			mdRV = rv(t, md.ResourceVersion)
		case <-wctx.Done():
			t.Fatalf("no forced rollout seen: mirror resourceVersion %d, MachineDeployment %d", mirrorRV, mdRV)
		}
	}
	if mirrorRV > mdRV {
		t.Errorf("the MachineDeployment carried rollout.after (resourceVersion %d) before the token's mirror served the latest payload (%d): a machine booting at once fetches the old payload", mdRV, mirrorRV)
	}
	st.WaitForPool(t, p, stack.RolloutTimeout, "the machine replaced on the mirrored payload, drift applied", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.OnlyPayload() == payload.PayloadLabelValue(served) &&
			stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
}

// rv reads a resourceVersion as the number kube-apiserver makes it.
func rv(t *testing.T, v string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", v, err)
	}
	return n
}
