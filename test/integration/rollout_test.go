package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

const rolloutTimeout = 2 * time.Minute

func TestANewPoolOfThreeBecomesReadyOnOnePayload(t *testing.T) {
	p := newPool(t, "workers", 3)
	s := waitFor(t, p, rolloutTimeout, "3 ready nodes on one payload", settled(3))
	if got := s.pool.Annotations[nodepoolv1.AnnotationCurrentPayload]; !strings.HasPrefix(got, s.onlyPayload()) {
		t.Errorf("annotation %s = %q, nodes booted %s", nodepoolv1.AnnotationCurrentPayload, got, s.onlyPayload())
	}
	if s.pool.Status.Version != "v1.36.3" || !isTrue(s.pool, nodepoolv1.ConditionReachedIgnitionEndpoint) {
		t.Errorf("status version %q, conditions %s", s.pool.Status.Version, conditions(s.pool))
	}
	if len(s.pool.Status.Nodes) != 1 || s.pool.Status.Nodes[0].Count != 3 {
		t.Errorf("status.nodes = %+v, want 3 nodes on one payload", s.pool.Status.Nodes)
	}
}

func TestPinnedManagementDriftReplacesNoMachineAndScaleUpMatches(t *testing.T) {
	p := newPool(t, "workers", 3)
	before := waitFor(t, p, rolloutTimeout, "3 ready nodes", settled(3))

	// The platform bumps the API-server proxy image.
	setManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + freshDigest() + "\n"
	})
	waitFor(t, p, 30*time.Second, "ConfigUpdatePending naming apiserver-proxy", func(s state) bool {
		c := condition(s.pool, nodepoolv1.ConditionConfigUpdatePending)
		return c.Status == metav1.ConditionTrue && c.Reason == nodepoolv1.ReasonManagementConfigDrift && strings.Contains(c.Message, "apiserver-proxy")
	})
	holdsFor(t, p, 30*time.Second, "no machine replaced", func(s state) bool {
		return s.machines.Equal(before.machines) && s.onlyPayload() == before.onlyPayload()
	})

	// A scale-up boots what the running nodes run.
	scale(t, p, 5)
	after := waitFor(t, p, rolloutTimeout, "5 ready nodes", settled(5))
	if after.onlyPayload() != before.onlyPayload() {
		t.Errorf("scale-up booted %v; the running nodes run %s", after.payloads, before.onlyPayload())
	}
	if !after.machines.IsSuperset(before.machines) {
		t.Error("a scale-up replaced machines")
	}
	if rows := after.pool.Status.PendingManagementChanges; len(rows) != 1 || rows[0].Component != "apiserver-proxy" {
		t.Errorf("pendingManagementChanges = %+v", rows)
	}
}

func TestOwnerChangeRollsEveryMachineAndAppliesPendingDrift(t *testing.T) {
	p := newPool(t, "workers", 3)
	before := waitFor(t, p, rolloutTimeout, "3 ready nodes", settled(3))
	setManagementConfig(t, func(string) string {
		return "apiServerProxyImage: registry.example/haproxy@sha256:" + freshDigest() + "\n"
	})
	waitFor(t, p, 30*time.Second, "drift reported", func(s state) bool { return isTrue(s.pool, nodepoolv1.ConditionConfigUpdatePending) })

	// The owner edits a config.
	update(t, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp.corp.example") })
	after := waitFor(t, p, rolloutTimeout, "every machine replaced, on one new payload", func(s state) bool {
		return settled(3)(s) && s.machines.Intersection(before.machines).Len() == 0 && s.onlyPayload() != before.onlyPayload()
	})
	if c := condition(after.pool, nodepoolv1.ConditionConfigUpdatePending); c.Status != metav1.ConditionFalse {
		t.Errorf("after the rollout ConfigUpdatePending = %s (%s), want False: the rollout applies the drift", c.Status, c.Message)
	}
	if !strings.HasPrefix(after.pool.Annotations[nodepoolv1.AnnotationCurrentPayload], after.onlyPayload()) {
		t.Errorf("annotation does not name the payload the nodes run: %v", after.pool.Annotations)
	}
}

func TestRemovingTheRolloutAnnotationReseedsItAndRollsNothing(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	want := before.pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig]
	update(t, p, func(p *nodepoolv1.NodePool) { delete(p.Annotations, nodepoolv1.AnnotationCurrentRolloutConfig) })
	waitFor(t, p, 30*time.Second, "annotation re-seeded", func(s state) bool {
		return s.pool.Annotations[nodepoolv1.AnnotationCurrentRolloutConfig] == want
	})
	holdsFor(t, p, 10*time.Second, "no machine replaced", func(s state) bool { return s.machines.Equal(before.machines) })
}

func TestABadConfigMapRollsNothingAndScaleUpStillWorks(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	update(t, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = "ignition: {version: 9.9.9}\n" })
	waitFor(t, p, 30*time.Second, "ValidMachineConfig False naming the ConfigMap", func(s state) bool {
		c := condition(s.pool, nodepoolv1.ConditionValidMachineConfig)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonInvalidConfig && strings.Contains(c.Message, "chrony")
	})
	scale(t, p, 3)
	after := waitFor(t, p, rolloutTimeout, "3 ready nodes", settled(3))
	if !after.machines.IsSuperset(before.machines) || after.onlyPayload() != before.onlyPayload() {
		t.Errorf("a bad config disturbed the pool: before %s, after %s", before, after)
	}
}

func TestANodepoolUpgradeRollsNothing(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	upgraded := settings
	upgraded.Inputs.RendererVersion = "v0.2.0-test"
	restartController(t, upgraded)
	defer restartController(t, settings)
	waitFor(t, p, 30*time.Second, "the renderer change reported as drift", func(s state) bool {
		c := condition(s.pool, nodepoolv1.ConditionConfigUpdatePending)
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "renderer")
	})
	holdsFor(t, p, 10*time.Second, "no machine replaced", func(s state) bool {
		return s.machines.Equal(before.machines) && s.onlyPayload() == before.onlyPayload()
	})
}

func TestAControllerRestartMidRolloutFinishesWithNoExtraRollout(t *testing.T) {
	p := newPool(t, "workers", 3)
	before := waitFor(t, p, rolloutTimeout, "3 ready nodes", settled(3))
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.Release.Version = "v1.36.4" })
	waitFor(t, p, 30*time.Second, "the version rollout under way", func(s state) bool { return s.pool.Status.Updating != "" })
	restartController(t, settings)
	after := waitFor(t, p, rolloutTimeout, "every machine replaced once", func(s state) bool {
		return settled(3)(s) && s.machines.Intersection(before.machines).Len() == 0 && s.pool.Status.Version == "v1.36.4"
	})
	holdsFor(t, p, 10*time.Second, "no second rollout", func(s state) bool { return s.machines.Equal(after.machines) })
}

func TestAFreshCredentialReachesNewNodesWithoutReplacingOld(t *testing.T) {
	p := newPoolWith(t, "workers", 2, func(ns string, p *nodepoolv1.NodePool) {
		mustCreate(t, stack.PullSecret(ns, "pull", "user:one"))
		p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
	})
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	update(t, stack.PullSecret(p.Namespace, "pull", ""), func(s *corev1.Secret) { s.Data = stack.PullSecret("", "", "user:two").Data })
	waitFor(t, p, 30*time.Second, "the credential change reported", func(s state) bool {
		return strings.Contains(condition(s.pool, nodepoolv1.ConditionConfigUpdatePending).Message, "pull-secret")
	})
	scale(t, p, 3)
	after := waitFor(t, p, rolloutTimeout, "3 ready nodes", func(s state) bool {
		return s.machines.Len() == 3 && s.nodes == 3 && isTrue(s.pool, nodepoolv1.ConditionReady)
	})
	if !after.machines.IsSuperset(before.machines) {
		t.Fatal("a credential rotation replaced machines")
	}
	if after.payloads[before.onlyPayload()] != 2 || len(after.payloads) != 2 {
		t.Errorf("want the 2 old nodes on their payload and the new node on the pinned payload with the new credential; got %v", after.payloads)
	}
}

func TestLabelsAndTaintsArePropagatedInPlace(t *testing.T) {
	p := newPool(t, "workers", 2)
	before := waitFor(t, p, rolloutTimeout, "2 ready nodes", settled(2))
	update(t, p, func(p *nodepoolv1.NodePool) {
		p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/role": "db"}
		p.Spec.Taints = []nodepoolv1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: "NoSchedule"}}
		p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	})
	waitFor(t, p, 30*time.Second, "labels and taints on every node", func(s state) bool {
		return nodesMatch(t, p, func(n *corev1.Node) bool {
			return n.Labels["example.com/role"] == "db" && hasTaint(n, "example.com/dedicated")
		})
	})
	// Removing them from the spec removes them from the nodes.
	update(t, p, func(p *nodepoolv1.NodePool) { p.Spec.NodeLabels, p.Spec.Taints = nil, nil })
	waitFor(t, p, 30*time.Second, "labels and taints removed", func(s state) bool {
		return nodesMatch(t, p, func(n *corev1.Node) bool {
			return n.Labels["example.com/role"] == "" && !hasTaint(n, "example.com/dedicated")
		})
	})
	if s := observe(t, p); !s.machines.Equal(before.machines) {
		t.Error("labels, taints or the drain timeout replaced machines")
	}
}

func TestDeletingAPoolRemovesEverythingItMade(t *testing.T) {
	p := newPool(t, "workers", 1)
	waitFor(t, p, rolloutTimeout, "1 ready node", settled(1))
	if err := env.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(rolloutTimeout)
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
