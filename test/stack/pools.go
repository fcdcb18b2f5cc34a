package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/inputs"
)

// ClusterName is the Cluster the pools NewPool creates belong to.
const ClusterName = "c1"

// RolloutTimeout bounds one rollout of a small pool on a busy machine.
const RolloutTimeout = 2 * time.Minute

// NewPool creates a Cluster with its control plane and a machine template
// in a fresh namespace, and a NodePool of n machines with one user config.
func (s *Stack) NewPool(t testing.TB, name string, n int32) *nodepoolv1.NodePool {
	t.Helper()
	return s.NewPoolWith(t, name, n, nil)
}

// NewPoolWith is NewPool with a hook that may create more objects in the
// namespace and edit the pool before it is created.
func (s *Stack) NewPoolWith(t testing.TB, name string, n int32, edit func(ns string, p *nodepoolv1.NodePool)) *nodepoolv1.NodePool {
	t.Helper()
	ns := s.Env.NewNamespace(t)
	s.MustCreateCluster(t, ns, ClusterName)
	s.MustCreateTemplate(t, ns, "small")
	s.MustCreate(t, ConfigMap(ns, "chrony", Chrony("time.corp.example")))
	p := &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName:               ClusterName,
			Replicas:                  ptr.To(n),
			Release:                   nodepoolv1.Release{Version: "v1.36.3"},
			Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
			InfrastructureTemplateRef: TemplateRef("small"),
		},
	}
	if edit != nil {
		edit(ns, p)
	}
	s.MustCreate(t, p)
	return p
}

// MustCreate creates o, failing the test if it cannot.
func (s *Stack) MustCreate(t testing.TB, o client.Object) {
	t.Helper()
	if err := s.Env.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// MustCreateCluster is CreateCluster, failing the test if it cannot.
func (s *Stack) MustCreateCluster(t testing.TB, ns, name string) {
	t.Helper()
	if err := CreateCluster(context.Background(), s.Env.Client, ns, name); err != nil {
		t.Fatal(err)
	}
}

// MustCreateTemplate is CreateTemplate, failing the test if it cannot.
func (s *Stack) MustCreateTemplate(t testing.TB, ns, name string) {
	t.Helper()
	if err := CreateTemplate(context.Background(), s.Env.Client, ns, name); err != nil {
		t.Fatal(err)
	}
}

// Update reads o, applies change and writes it back, retrying conflicts.
func Update[T client.Object](t testing.TB, c client.Client, o T, change func(T)) {
	t.Helper()
	for range 20 {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		change(o)
		err := c.Update(context.Background(), o)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not update %s", o.GetName())
}

// SetChrony points the user config chrony (ConfigMap) of namespace ns at
// server: an owner change, which rolls every machine of the pools using it.
func SetChrony(t testing.TB, c client.Client, ns, server string) {
	t.Helper()
	Update(t, c, ConfigMap(ns, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = Chrony(server) })
}

// SetManagementConfig changes the platform's management config (shared by
// every pool of the test run).
func (s *Stack) SetManagementConfig(t testing.TB, change func(string) string) {
	t.Helper()
	cm := ManagementConfig("")
	Update(t, s.Env.Client, cm, func(cm *corev1.ConfigMap) {
		cm.Data[inputs.ManagementConfigKey] = change(cm.Data[inputs.ManagementConfigKey])
	})
}

// MustRestartController is RestartController, failing the test if the
// controller does not start again.
func (s *Stack) MustRestartController(t testing.TB, settings controller.Settings) {
	t.Helper()
	if err := s.RestartController(settings); err != nil {
		t.Fatal(err)
	}
}

// FreshDigest is a sha256 digest no earlier call returned, in this run or
// another against the same API server (-count, a replayed test): a
// management change that sets the value the config already holds changes
// nothing, and a test waiting for it to roll would wait in vain.
func FreshDigest() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%d", time.Now().UnixNano(), digests.Add(1))))
	return hex.EncodeToString(sum[:])
}

var digests atomic.Int64
