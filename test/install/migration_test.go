package install

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/test/harness"
)

// mirrorArg is the arg both shipped Deployments carry since the payload
// server reads the controller's mirrors.
const mirrorArg = "--mirror-namespace"

// TestUpgradeToMirrorsReplacesNoMachineAndFailsNoScaleUp starts from the
// layout before mirrors (the payload server reading the pools' own Secrets
// in every namespace through a ClusterRoleBinding, a controller writing no
// mirrors), boots a pool, and upgrades as a kubectl apply of the release
// manifest does, with the pool scaled up at each step: the new payload
// server replica and controller start beside the old ones; the old
// controller hands its lease over; the new server becomes ready only once
// the new controller has mirrored every pool, while the old replicas
// serve; the old replicas stop and the ClusterRoleBinding goes. Every
// machine boots the pool's one payload, none is replaced, and the pool
// still scales once only the new server serves, from the mirrors alone.
func TestUpgradeToMirrorsReplacesNoMachineAndFailsNoScaleUp(t *testing.T) {
	ctx := context.Background()
	// Today's layout: no marker (another test's controller may have
	// written one), and the old RBAC of the server.
	marker := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: secrets.MirrorsReadyName}}
	if err := env.Client.Delete(ctx, marker); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	before, err := kustomizeBuild(filepath.Join(root, "config", "payload-server", "every-namespace"))
	if err != nil {
		t.Fatal(err)
	}
	var oldRBAC []*unstructured.Unstructured
	for _, u := range before {
		if k := u.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
			oldRBAC = append(oldRBAC, u)
			if err := apply(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(oldRBAC) != 2 {
		t.Fatalf("config/payload-server/every-namespace has %d cluster-wide RBAC objects, want a ClusterRole and its binding", len(oldRBAC))
	}
	removeOld := func() {
		for _, u := range oldRBAC {
			if err := env.Client.Delete(ctx, u.DeepCopy()); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(removeOld)
	old := runOptions{dropArgs: []string{mirrorArg}}
	oldServers := []*replica{startReplica(t, payloadName, "old-payload-server-a", old), startReplica(t, payloadName, "old-payload-server-b", old)}
	service.SetBackends(oldServers[0].Addrs["https"], oldServers[1].Addrs["https"])
	t.Cleanup(func() { service.SetBackends() })
	oldController := startReplica(t, controllerName, "old-controller", old)

	p := newPool(t, 2, 0)
	machines := recordMachines(t, p.Namespace)
	s := waitFor(t, p, "2 ready nodes on today's layout", func(s state) bool {
		return settled(2)(s) && meta.IsStatusConditionTrue(s.pool.Status.Conditions, nodepoolv1.ConditionReachedIgnitionEndpoint)
	})
	payload, first := s.payload(), s.machines
	if n := countMirrors(t, p); n != 0 {
		t.Fatalf("%d mirrors before the upgrade", n)
	}

	// The upgrade: new replicas start beside the old ones (maxUnavailable
	// 0); the new server is not ready, so not an endpoint of the Service.
	newServer := startReplica(t, payloadName, "new-payload-server", runOptions{noWait: true})
	startReplica(t, controllerName, "new-controller", runOptions{})
	scale(t, p, 3)
	oldController.stop()
	scale(t, p, 4)
	newServer.waitReady(t, deployment(t, payloadName).Spec.Template.Spec.Containers[0].ReadinessProbe)
	if got := env.Client.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.Secret{}); got != nil {
		t.Fatalf("the new payload server is ready without the controller's marker: %v", got)
	}
	// Ready: it becomes an endpoint, the old replicas go, and so does the
	// old binding (helm upgrade deletes it; with kubectl, the operator).
	service.SetBackends(newServer.Addrs["https"], oldServers[0].Addrs["https"], oldServers[1].Addrs["https"])
	for _, r := range oldServers {
		r.stop()
	}
	service.SetBackends(newServer.Addrs["https"])
	removeOld()
	s = waitFor(t, p, "4 ready nodes through the upgrade", settled(4))
	if s.payload() != payload {
		t.Fatalf("the nodes booted %v through the upgrade, want all on %s", s.payloads, payload)
	}

	// Only the new server serves, from the mirrors: a scale-up boots.
	scale(t, p, 5)
	s = waitFor(t, p, "5 ready nodes from the mirrors", settled(5))
	if s.payload() != payload {
		t.Errorf("the nodes booted %v after the upgrade, want all on %s", s.payloads, payload)
	}
	created, deleted := machines.seen()
	if deleted.Len() != 0 || !s.machines.IsSuperset(first) || created.Len() != 5 {
		t.Errorf("machines created %d, deleted %d (the first 2 kept: %v): the upgrade replaced machines", created.Len(), deleted.Len(), s.machines.IsSuperset(first))
	}
	if n := countMirrors(t, p); n < 2 {
		t.Errorf("%d mirrors after the upgrade, want the pool's token and payload", n)
	}
	checkReplicas(t)
}

// countMirrors counts the pool's mirrors in the controller's namespace.
func countMirrors(t *testing.T, p *nodepoolv1.NodePool) int {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(systemNamespace), client.MatchingLabelsSelector{Selector: secrets.MirrorsOf(p.Namespace, p.Name)}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
