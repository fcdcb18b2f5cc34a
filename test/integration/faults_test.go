package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/stack"
)

// machineDeploymentOf reads the pool's MachineDeployment.
func machineDeploymentOf(t *testing.T, p *nodepoolv1.NodePool) *clusterv1.MachineDeployment {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), md); err != nil {
		t.Fatal(err)
	}
	return md
}

// currentUserData reads the user-data Secret the pool's MachineDeployment
// references.
func currentUserData(t *testing.T, p *nodepoolv1.NodePool) *corev1.Secret {
	t.Helper()
	md := machineDeploymentOf(t, p)
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.Namespace, Name: ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")}
	if err := env.Client.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func ownedByAPool(o metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "NodePool" {
			return true
		}
	}
	return false
}

func TestAHandMadeMachineDeploymentOfThePoolsNameIsNeverAdopted(t *testing.T) {
	ctx := context.Background()
	var handmade *clusterv1.MachineDeployment
	p := st.NewPoolWith(t, "workers", 1, func(ns string, p *nodepoolv1.NodePool) {
		handmade = &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, Labels: map[string]string{"team": "someone-else"}},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: stack.ClusterName,
				Replicas:    ptr.To[int32](0),
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterNameLabel: stack.ClusterName, "team": "someone-else"}},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{clusterv1.ClusterNameLabel: stack.ClusterName, "team": "someone-else"}},
					Spec: clusterv1.MachineSpec{
						ClusterName:       stack.ClusterName,
						Version:           "v1.30.0",
						Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("someone-elses-data")},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: p.Spec.InfrastructureTemplateRef.APIGroup, Kind: p.Spec.InfrastructureTemplateRef.Kind, Name: "small"},
					},
				},
			},
		}
		st.MustCreate(t, handmade)
	})
	st.WaitForPool(t, p, 60*time.Second, "the conflict reported on the pool", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionReconciliationActive)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonNameConflict && strings.Contains(c.Message, "MachineDeployment workers")
	})
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		md := machineDeploymentOf(t, p)
		if ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "") != "someone-elses-data" || md.Spec.Template.Spec.Version != "v1.30.0" ||
			ptr.Deref(md.Spec.Replicas, -1) != 0 || md.Labels[nodepoolv1.LabelPool] != "" || ownedByAPool(md) {
			t.Fatalf("the hand-made MachineDeployment was changed: %+v %+v", md.ObjectMeta, md.Spec)
		}
		time.Sleep(500 * time.Millisecond)
	}
	secretsOfPool := &corev1.SecretList{}
	if err := env.Client.List(ctx, secretsOfPool, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(secretsOfPool.Items) != 0 {
		t.Errorf("a pool that cannot run made %d Secrets", len(secretsOfPool.Items))
	}
	// Deleting the pool does not hang on, or touch, someone else's objects.
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 60*time.Second, "the pool gone", func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{})
	}, apierrors.IsNotFound, func(err error) string { return fmt.Sprint(err) })
	if md := machineDeploymentOf(t, p); !md.DeletionTimestamp.IsZero() {
		t.Error("deleting the pool deleted the hand-made MachineDeployment")
	}
}

func TestDeletingTheUserDataSecretOfAPausedPoolRollsNothing(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.PausedUntil = "true"
		p.Spec.Release.Version = "v1.36.4"
	})
	st.WaitForPool(t, p, 60*time.Second, "the version change held by the pause", func(s stack.PoolState) bool {
		return stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingVersion).Reason == nodepoolv1.ReasonPaused
	})
	ud := currentUserData(t, p)
	value := ud.Data["value"]
	if err := env.Client.Delete(ctx, ud); err != nil {
		t.Fatal(err)
	}
	st.WaitForPool(t, p, 60*time.Second, "the deletion reported", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionBootstrapDataAvailable)
		return c.Reason == nodepoolv1.ReasonSecretInUse && strings.Contains(c.Message, ud.Name)
	})
	st.HoldsFor(t, p, 10*time.Second, "no machine replaced and the rollout still held", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines) && stack.Condition(s.Pool, nodepoolv1.ConditionUpdatingVersion).Reason == nodepoolv1.ReasonPaused
	})
	kept := currentUserData(t, p)
	if kept.DeletionTimestamp.IsZero() || !bytes.Equal(kept.Data["value"], value) {
		t.Fatalf("the user-data Secret machines boot from must stay as it was while in use: deleting %v", kept.DeletionTimestamp)
	}
	scale(t, p, 3)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "a scale-up boots the running payload", stack.PoolSettled(3))
	if !after.Machines.IsSuperset(before.Machines) || after.OnlyPayload() != before.OnlyPayload() {
		t.Fatalf("scale-up after the delete: before %s, after %s", before, after)
	}
	// Resumed, the held rollout runs; the deleted Secret goes once unused.
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.PausedUntil = "" })
	st.WaitForPool(t, p, 2*stack.RolloutTimeout, "the held version rolled out", func(s stack.PoolState) bool {
		return stack.PoolSettled(3)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.Pool.Status.Version == "v1.36.4"
	})
	stack.WaitFor(t, 60*time.Second, "the deleted user-data Secret removed once unreferenced", func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(ud), &corev1.Secret{})
	}, apierrors.IsNotFound, func(err error) string { return fmt.Sprint(err) })
}

func TestAnEditedUserDataSecretIsRestored(t *testing.T) {
	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	ud := currentUserData(t, p)
	want := ud.Data["value"]
	stack.Update(t, env.Client, ud, func(s *corev1.Secret) { s.Data["value"] = []byte(`{"ignition":{"version":"3.4.0"}}`) })
	stack.WaitFor(t, 60*time.Second, "the user-data restored", func() []byte {
		return currentUserData(t, p).Data["value"]
	}, func(v []byte) bool { return bytes.Equal(v, want) }, func(v []byte) string { return string(v) })
	// A scale-up boots from it.
	scale(t, p, 2)
	st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
}

func TestADeletedOwnedSecretSurvivesWhileInUseAndIsProtectedAgain(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "workers", 1)
	st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	list := &corev1.SecretList{}
	if err := env.Client.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) < 3 {
		t.Fatalf("want user-data, token and payload Secrets, got %d", len(list.Items))
	}
	for i := range list.Items {
		// The history archive is no machine's: it has no in-use finalizer.
		if s := &list.Items[i]; s.Name != history.ArchiveName(p.Name) && !controllerutil.ContainsFinalizer(s, nodepoolv1.FinalizerInUse) {
			t.Errorf("Secret %s lacks the in-use finalizer", s.Name)
		}
	}
	// Deleting the pool removes them all: the finalizer never outlives it.
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, stack.RolloutTimeout, "the pool and its Secrets gone", func() int {
		l := &corev1.SecretList{}
		if err := env.Client.List(ctx, l, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{}); !apierrors.IsNotFound(err) {
			return -1
		}
		return len(l.Items)
	}, func(n int) bool { return n == 0 }, func(n int) string { return fmt.Sprintf("%d Secrets left (-1: pool still there)", n) })
}

func TestAPayloadTooLargeForASecretIsRefusedAndScalingGoesOn(t *testing.T) {
	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	// About 760 KiB of incompressible data: the payload keeps it twice
	// (merged and as a fragment), so its Secret would pass 1 MiB.
	raw := make([]byte, 570<<10)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	big := fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/big","mode":420,"contents":{"source":"data:;base64,%s"}}]}}`,
		base64.StdEncoding.EncodeToString(raw))
	st.MustCreate(t, stack.ConfigMap(p.Namespace, "big", big))
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = append(p.Spec.Config, nodepoolv1.LocalObjectReference{Name: "big"})
	})
	st.WaitForPool(t, p, 60*time.Second, "ValidGeneratedPayload False naming the size and the limit", func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionValidGeneratedPayload)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonPayloadTooLarge && strings.Contains(c.Message, "bytes")
	})
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
		p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/role": "big"}
		p.Spec.Replicas = ptr.To[int32](2)
	})
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "scale-up and labels still applied", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && nodesMatch(t, p, func(n *corev1.Node) bool { return n.Labels["example.com/role"] == "big" })
	})
	if !after.Machines.IsSuperset(before.Machines) || after.OnlyPayload() != before.OnlyPayload() {
		t.Errorf("a payload too large disturbed the pool: before %s, after %s", before, after)
	}
	if !stack.IsTrue(after.Pool, nodepoolv1.ConditionReconciliationActive) {
		t.Errorf("ReconciliationActive: %+v", stack.Condition(after.Pool, nodepoolv1.ConditionReconciliationActive))
	}
}

// clonesOf lists the pool's infrastructure template clones.
func clonesOf(t *testing.T, p *nodepoolv1.NodePool) []string {
	t.Helper()
	list := &simv1.SimMachineTemplateList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.DeletionTimestamp.IsZero() {
			out = append(out, c.Name)
		}
	}
	return out
}

// ownerRefWriters names the clients other than nodepool that wrote obj's
// owner references (its managed fields).
func ownerRefWriters(obj client.Object) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		if m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:ownerReferences"`) && !strings.HasPrefix(m.Manager, "nodepool") {
			out = append(out, m.Manager)
		}
	}
	return out
}

// A pool's template clone and MachineDeployment are made owned by the
// Cluster as Cluster API would make them, so it has no patch of their
// ownership to write (a write a pool fewer each at fleet scale); once the
// pool has rolled, every clone that no machine uses goes, and the last
// with the pool.
func TestTemplateClonesAreCleanedUpByReference(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	first := clonesOf(t, p)
	if len(first) != 1 {
		t.Fatalf("clones %v, want one", first)
	}
	clone := &simv1.SimMachineTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: first[0]}, clone); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{clone, machineDeploymentOf(t, p)} {
		if !slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.Kind == "Cluster" && r.Name == p.Spec.ClusterName }) {
			t.Errorf("%T %s is not owned by its Cluster: %v", o, o.GetName(), o.GetOwnerReferences())
		}
		if w := ownerRefWriters(o); len(w) > 0 {
			t.Errorf("%T %s had its owner references written by %v, want by nodepool alone", o, o.GetName(), w)
		}
	}
	if err := simtest.CreateMachineTemplate(ctx, env.Client, p.Namespace, "large", simv1.SimMachineSpec{CPUs: 8}); err != nil {
		t.Fatal(err)
	}
	stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.InfrastructureTemplateRef = stack.TemplateRef("large") })
	st.WaitForPool(t, p, stack.RolloutTimeout, "the machine replaced on the new template", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
	stack.WaitFor(t, 60*time.Second, "only the new template's clone left", func() []string { return clonesOf(t, p) },
		func(c []string) bool { return len(c) == 1 && c[0] != first[0] }, func(c []string) string { return fmt.Sprint(c) })
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, stack.RolloutTimeout, "no clone left once the pool is gone", func() []string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &nodepoolv1.NodePool{}); !apierrors.IsNotFound(err) {
			return []string{"(pool still there)"}
		}
		return clonesOf(t, p)
	}, func(c []string) bool { return len(c) == 0 }, func(c []string) string { return fmt.Sprint(c) })
}

func TestAnInPlaceEditOfTheReferencedTemplateRollsWithoutWaitingForAResync(t *testing.T) {
	ctx := context.Background()
	slow := settings
	slow.ResyncPeriod = 10 * time.Minute
	st.MustRestartController(t, slow)
	defer st.MustRestartController(t, settings)
	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	tmpl := &simv1.SimMachineTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: "small"}, tmpl); err != nil {
		t.Fatal(err)
	}
	stack.Update(t, env.Client, tmpl, func(m *simv1.SimMachineTemplate) { m.Spec.Template.Spec.CPUs = 4 })
	// Well under the 10 minute resync: only the watch can have woken it.
	st.WaitForPool(t, p, 90*time.Second, "the machine replaced on the edited template", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
}

func TestAPayloadServerURLChangeReachesTheUserDataAtOnceAndRollsNothing(t *testing.T) {
	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	moved := settings
	// The same server under another URL (a query the server ignores):
	// user-data content changes, its name must not.
	moved.Inputs.PayloadServerURL = settings.Inputs.PayloadServerURL + "?moved=1"
	st.MustRestartController(t, moved)
	defer st.MustRestartController(t, settings)
	name := currentUserData(t, p).Name
	stack.WaitFor(t, 60*time.Second, "the user-data pointing at the new URL", func() string {
		return string(currentUserData(t, p).Data["value"])
	}, func(v string) bool { return strings.Contains(v, "moved=1") }, func(v string) string { return v })
	if got := currentUserData(t, p).Name; got != name {
		t.Fatalf("the user-data was renamed %s → %s: that rolls machines", name, got)
	}
	scale(t, p, 2)
	// The URL is a fresh component: the new node boots it, the old one
	// keeps running what it booted.
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "a scale-up boots through the new URL", func(s stack.PoolState) bool {
		return s.Machines.Len() == 2 && s.Nodes == 2 && len(s.Payloads) == 2 && stack.IsTrue(s.Pool, nodepoolv1.ConditionReady)
	})
	if !after.Machines.IsSuperset(before.Machines) {
		t.Errorf("a URL change replaced machines: before %s, after %s", before, after)
	}
}

func TestTheControllerLosingTheAPIServerForSecondsLosesNoScaleUpAndRollsNothing(t *testing.T) {
	p := st.NewPool(t, "workers", 1)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "1 ready node", stack.PoolSettled(1))
	records := len(st.HistoryOf(t, p))
	st.CutAPIServer(5 * time.Second)
	// Written while the controller's watches are broken: it sees the
	// change only once it lists again.
	scale(t, p, 2)
	after := st.WaitForPool(t, p, stack.RolloutTimeout, "the scale-up made once the API server is back", stack.PoolSettled(2))
	if !after.Machines.IsSuperset(before.Machines) || after.OnlyPayload() != before.OnlyPayload() {
		t.Errorf("the outage disturbed the pool: before %s, after %s", before, after)
	}
	if got := len(st.HistoryOf(t, p)); got != records {
		t.Errorf("%d rollout records after the outage, want %d", got, records)
	}
}
