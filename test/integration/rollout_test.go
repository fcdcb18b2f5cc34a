package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

func TestANewPoolOfThreeBecomesReadyOnOnePayload(t *testing.T) {
	p := st.NewPool(t, "workers", 3)
	s := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes on one payload", stack.PoolSettled(3))
	if got := s.Pool.Annotations[nodepoolv1.AnnotationCurrentPayload]; !strings.HasPrefix(got, s.OnlyPayload()) {
		t.Errorf("annotation %s = %q, nodes booted %s", nodepoolv1.AnnotationCurrentPayload, got, s.OnlyPayload())
	}
	if s.Pool.Status.Version != "v1.36.3" || !stack.IsTrue(s.Pool, nodepoolv1.ConditionReachedIgnitionEndpoint) {
		t.Errorf("status version %q, conditions %s", s.Pool.Status.Version, stack.Conditions(s.Pool))
	}
	if len(s.Pool.Status.Nodes) != 1 || s.Pool.Status.Nodes[0].Count != 3 {
		t.Errorf("status.nodes = %+v, want 3 nodes on one payload", s.Pool.Status.Nodes)
	}
	// Its first annotations are recorded, not seeded: nothing was lost.
	for _, reason := range []string{nodepoolv1.EventSeeded, nodepoolv1.EventCorrected} {
		for _, note := range stack.PoolEvents(t, env.Client, p, reason) {
			t.Errorf("a new pool said %s: %s", reason, note)
		}
	}
}

// A settled pool of 3 was 6.8 KB as etcd stores it (compact JSON with
// managedFields), half of it the field manager's entries, one per field of
// every condition: the status is now one field to it (atomic), and a
// condition in its normal state carries no message another field says.
func TestASettledPoolIsStoredInLessThan5KB(t *testing.T) {
	p := st.NewPool(t, "small", 3)
	st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes on one payload", stack.PoolSettled(3))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nodepoolv1.GroupVersion.WithKind("NodePool"))
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), u); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(u.Object) // compact, as etcd stores a custom resource
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 5*1024 {
		t.Errorf("a settled pool of 3 is %d bytes stored, want at most 5 KiB:\n%s", len(raw), raw)
	}
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource == "status" && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"k:{`) {
			t.Errorf("manager %s's status entry names fields inside the status: %s", mf.Manager, mf.FieldsV1.Raw)
		}
	}
}

func TestPinnedManagementDriftReplacesNoMachineAndScaleUpMatches(t *testing.T) {
	p := st.NewPool(t, "workers", 3)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))

	// The platform bumps the API-server proxy image.
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "ConfigUpdatePending naming apiserver-proxy", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending)
		return c.Status == metav1.ConditionTrue && c.Reason == nodepoolv1.ReasonManagementConfigDrift && strings.Contains(c.Message, "apiserver-proxy")
	})
	st.HoldsFor(t, p, 30*time.Second, "no machine replaced", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines) && s.OnlyPayload() == before.OnlyPayload()
	})

	// A scale-up boots what the running nodes run.
	scale(t, p, 5)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "5 ready nodes", stack.PoolSettled(5))
	if after.OnlyPayload() != before.OnlyPayload() {
		t.Errorf("scale-up booted %v; the running nodes run %s", after.Payloads, before.OnlyPayload())
	}
	if !after.Machines.IsSuperset(before.Machines) {
		t.Error("a scale-up replaced machines")
	}
	if rows := after.Pool.Status.PendingManagementChanges; len(rows) != 1 || rows[0].Component != "apiserver-proxy" {
		t.Errorf("pendingManagementChanges = %+v", rows)
	}
}

func TestOwnerChangeRollsEveryMachineAndAppliesPendingDrift(t *testing.T) {
	p := st.NewPool(t, "workers", 3)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	st.SetManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + stack.FreshDigest() + "\n"
	})
	st.WaitForPool(t, p, 30*time.Second, "drift reported", func(s stack.PoolState) bool { return stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) })

	// The owner edits a config.
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp.corp.example") })
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced, on one new payload", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.OnlyPayload() != before.OnlyPayload()
	})
	if c := stack.Condition(after.Pool, nodepoolv1.ConditionConfigUpdatePending); c.Status != metav1.ConditionFalse {
		t.Errorf("after the rollout ConfigUpdatePending = %s (%s), want False: the rollout applies the drift", c.Status, c.Message)
	}
	if !strings.HasPrefix(after.Pool.Annotations[nodepoolv1.AnnotationCurrentPayload], after.OnlyPayload()) {
		t.Errorf("annotation does not name the payload the nodes run: %v", after.Pool.Annotations)
	}
}

func TestRemovingTheRolloutAnnotationReseedsItAndRollsNothing(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	want := before.Pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig]
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { delete(p.Annotations, nodepoolv1.AnnotationCurrentRolloutConfig) })
	st.WaitForPool(t, p, 30*time.Second, "annotation re-seeded", func(s stack.PoolState) bool {
		return s.Pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig] == want
	})
	st.HoldsFor(t, p, 10*time.Second, "no machine replaced", func(s stack.PoolState) bool { return s.Machines.Equal(before.Machines) })
}

func TestABadConfigMapRollsNothingAndScaleUpStillWorks(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = "ignition: {version: 9.9.9}\n" })
	st.WaitForPool(t, p, 30*time.Second, "ValidMachineConfig False naming the ConfigMap", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionValidMachineConfig)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonInvalidConfig && strings.Contains(c.Message, "chrony")
	})
	scale(t, p, 3)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	if !after.Machines.IsSuperset(before.Machines) || after.OnlyPayload() != before.OnlyPayload() {
		t.Errorf("a bad config disturbed the pool: before %s, after %s", before, after)
	}
}

func TestANodepoolUpgradeRollsNothing(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	upgraded := settings
	upgraded.Inputs.RendererVersion = "v0.2.0-test"
	st.MustRestartController(t, upgraded)
	defer st.MustRestartController(t, settings)
	st.WaitForPool(t, p, 30*time.Second, "the renderer change reported as drift", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending)
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "renderer")
	})
	st.HoldsFor(t, p, 10*time.Second, "no machine replaced", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines) && s.OnlyPayload() == before.OnlyPayload()
	})
}

func TestAControllerRestartMidRolloutFinishesWithNoExtraRollout(t *testing.T) {
	p := st.NewPool(t, "workers", 3)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", stack.PoolSettled(3))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Release.Version = "v1.36.4" })
	st.WaitForPool(t, p, 30*time.Second, "the version rollout under way", func(s stack.PoolState) bool { return s.Pool.Status.Updating != "" })
	st.MustRestartController(t, settings)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced once", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.Pool.Status.Version == "v1.36.4"
	})
	st.HoldsFor(t, p, 10*time.Second, "no second rollout", func(s stack.PoolState) bool { return s.Machines.Equal(after.Machines) })
}

func TestAFreshCredentialReachesNewNodesWithoutReplacingOld(t *testing.T) {
	p := st.NewPoolWith(t, "workers", 2, func(ns string, p *nodepoolv1.NodePool) {
		st.MustCreate(t, stack.PullSecret(ns, "pull", "user:one"))
		p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, stack.PullSecret(p.Namespace, "pull", ""), func(s *corev1.Secret) { s.Data = stack.PullSecret("", "", "user:two").Data })
	st.WaitForPool(t, p, 30*time.Second, "the credential change reported", func(s stack.PoolState) bool {
		return strings.Contains(stack.Condition(s.Pool, nodepoolv1.ConditionConfigUpdatePending).Message, "pull-secret")
	})
	scale(t, p, 3)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "3 ready nodes", func(s stack.PoolState) bool {
		return s.Machines.Len() == 3 && s.Nodes == 3 && stack.IsTrue(s.Pool, nodepoolv1.ConditionReady)
	})
	if !after.Machines.IsSuperset(before.Machines) {
		t.Fatal("a credential rotation replaced machines")
	}
	if after.Payloads[before.OnlyPayload()] != 2 || len(after.Payloads) != 2 {
		t.Errorf("want the 2 old nodes on their payload and the new node on the pinned payload with the new credential; got %v", after.Payloads)
	}
}

func TestLabelsAndTaintsArePropagatedInPlace(t *testing.T) {
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/role": "db"}
		p.Spec.Taints = []nodepoolv1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: "NoSchedule"}}
		p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	})
	st.WaitForPool(t, p, 30*time.Second, "labels and taints on every node", func(s stack.PoolState) bool {
		return nodesMatch(t, p, func(n *corev1.Node) bool {
			return n.Labels["example.com/role"] == "db" && hasTaint(n, "example.com/dedicated")
		})
	})
	// Removing them from the spec removes them from the nodes.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.NodeLabels, p.Spec.Taints = nil, nil })
	st.WaitForPool(t, p, 30*time.Second, "labels and taints removed", func(s stack.PoolState) bool {
		return nodesMatch(t, p, func(n *corev1.Node) bool {
			return n.Labels["example.com/role"] == "" && !hasTaint(n, "example.com/dedicated")
		})
	})
	if s := st.Observe(t, p); !s.Machines.Equal(before.Machines) {
		t.Error("labels, taints or the drain timeout replaced machines")
	}
}

func TestDeletingAPoolRemovesEverythingItMade(t *testing.T) {
	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	if err := env.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(stack.RolloutTimeout)
	for time.Now().Before(deadline) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{})
		secrets := &corev1.SecretList{}
		_ = env.Client.List(context.Background(), secrets, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name})
		if apierrors.IsNotFound(err) && len(secrets.Items) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("the pool, or Secrets it made, are still there")
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
