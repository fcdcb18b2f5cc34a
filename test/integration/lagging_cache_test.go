package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/stack"
)

// laggingSecrets is the controller's client with a cache that has not yet
// seen the writes to some Secrets: reads of a frozen Secret return it as
// it was when frozen, as an informer behind the API server does under
// load (it delivers each kind's events on its own, so the controller can
// see its own write to a MachineDeployment before its write, a moment
// later, to a Secret).
type laggingSecrets struct {
	client.Client
	mu     sync.Mutex
	frozen map[types.NamespacedName]*corev1.Secret
	// refuse names a Secret whose next patch fails with a conflict, as
	// one written by someone else since it was read would.
	refuse *types.NamespacedName
}

func (c *laggingSecrets) refuseNextPatch(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = &key
}

func (c *laggingSecrets) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.mu.Lock()
		refused := c.refuse != nil && *c.refuse == client.ObjectKeyFromObject(obj)
		if refused {
			c.refuse = nil
		}
		c.mu.Unlock()
		if refused {
			return apierrors.NewConflict(corev1.Resource("secrets"), obj.GetName(), errors.New("the object has been modified"))
		}
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *laggingSecrets) freeze(s *corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen == nil {
		c.frozen = map[types.NamespacedName]*corev1.Secret{}
	}
	c.frozen[client.ObjectKeyFromObject(s)] = s.DeepCopy()
}

func (c *laggingSecrets) thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = nil
}

func (c *laggingSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if s, ok := obj.(*corev1.Secret); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		if old, ok := c.frozen[key]; ok {
			old.DeepCopyInto(s)
		}
	}
	return nil
}

func (c *laggingSecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*corev1.SecretList); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range l.Items {
			if old, ok := c.frozen[client.ObjectKeyFromObject(&l.Items[i])]; ok {
				old.DeepCopyInto(&l.Items[i])
			}
		}
	}
	return nil
}

// poolWithPendingDrift runs the controller reading through a
// laggingSecrets client (the stack's own again after the test), makes a
// one-machine pool, and bumps the platform's proxy image: the pool
// settled, its drift pending, and the user-data Secret its
// MachineDeployment references.
func poolWithPendingDrift(t *testing.T) (*laggingSecrets, *nodepoolv1.NodePool, stack.PoolState, *corev1.Secret) {
	t.Helper()
	lag := &laggingSecrets{}
	if err := st.RestartControllerReadingThrough(settings, func(c client.Client) client.Client { lag.Client = c; return lag }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.MustRestartController(t, settings) })

	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })

	ctx := context.Background()
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, md); err != nil {
		t.Fatal(err)
	}
	ud := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: *md.Spec.Template.Spec.Bootstrap.DataSecretName}, ud); err != nil {
		t.Fatal(err)
	}
	return lag, p, before, ud
}

// A forced rollout rewrites the pool's user-data (the payload its rollout
// now started with) after its token and MachineDeployment. The look that
// follows can read the MachineDeployment and the token as written and the
// user-data as it was: the controller does not decide on it (it waits
// for its cache to show its own write), so the token keeps serving the
// latest payload and the machine Cluster API makes boots it. Deciding on
// it pointed the token back at the payload the machines ran, and a
// machine made then booted it: the forced rollout was done and the drift
// still pending.
func TestAForcedRolloutsTokenKeepsTheLatestPayloadWhileTheCacheLagsBehindItsUserData(t *testing.T) {
	ctx := context.Background()
	lag, p, before, ud := poolWithPendingDrift(t)
	tokenName := secrets.TokenSecretName(p.Name, secrets.DecodeUserData(ud).RolloutHash)

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, stack.RolloutTimeout)
	defer cancel()
	tokens, err := wc.Watch(wctx, &corev1.SecretList{}, client.InNamespace(p.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer tokens.Stop()

	lag.freeze(ud)
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	// The token's payload as it changes, while the cache shows the
	// user-data as it was, and a few seconds after.
	running := before.OnlyPayload()
	latest := ""
	var thawed <-chan time.Time
	for done := false; !done; {
		select {
		case ev, ok := <-tokens.ResultChan():
			if !ok {
				t.Fatal("the Secrets' watch ended")
			}
			s, isSecret := ev.Object.(*corev1.Secret)
			if !isSecret || ev.Type == watch.Deleted || s.Name != tokenName {
				continue
			}
			served := string(s.Data[secrets.KeyPayloadHash])
			switch {
			case latest == "" && payload.PayloadLabelValue(served) != running:
				latest = served
				thawed = time.After(5 * time.Second)
			case latest != "" && served != latest:
				t.Fatalf("the forced rollout's token went back from the latest payload %s to %s while the controller's cache showed the user-data as it was before the rollout", payload.Short(latest), payload.Short(served))
			}
		case <-thawed:
			done = true
		case <-wctx.Done():
			t.Fatalf("no forced rollout seen: the token still serves %s", running)
		}
	}
	lag.thaw()
	st.WaitForPool(t, p, stack.RolloutTimeout, "the machine replaced on the latest payload, drift applied", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.OnlyPayload() == payload.PayloadLabelValue(latest) &&
			stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
}

// A forced rollout whose reconcile stopped after its MachineDeployment
// (here its user-data rewrite refused with a conflict) still ends on its
// payload: its record says what it boots, so the user-data is written
// again from it, the token keeps serving it, and no drift is left
// pending once the machine is replaced. Before, the user-data kept the
// payload before the rollout: the drift read as pending and the token
// went back to the old payload.
func TestAForcedRolloutWhoseUserDataRewriteFailedEndsOnItsPayload(t *testing.T) {
	ctx := context.Background()
	lag, p, before, current := poolWithPendingDrift(t)
	userData := client.ObjectKeyFromObject(current)

	lag.refuseNextPatch(userData)
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Annotations[nodepoolv1.AnnotationApplyPending] = time.Now().UTC().Format(time.RFC3339)
	})
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "the machine replaced, drift applied", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.OnlyPayload() != before.OnlyPayload() &&
			stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Status == metav1.ConditionFalse
	})
	ud := &corev1.Secret{}
	if err := env.Client.Get(ctx, userData, ud); err != nil {
		t.Fatal(err)
	}
	if got := payload.PayloadLabelValue(secrets.DecodeUserData(ud).StartedPayload); got != after.OnlyPayload() {
		t.Errorf("the user-data starts from %s, want the payload the forced rollout booted, %s", got, after.OnlyPayload())
	}
	tok := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: secrets.TokenSecretName(p.Name, secrets.DecodeUserData(ud).RolloutHash)}, tok); err != nil {
		t.Fatal(err)
	}
	if got := payload.PayloadLabelValue(string(tok.Data[secrets.KeyPayloadHash])); got != after.OnlyPayload() {
		t.Errorf("the token serves %s, want the payload the forced rollout booted, %s", got, after.OnlyPayload())
	}
}
