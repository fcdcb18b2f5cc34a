package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// The identities the shipped policies name.
const (
	controllerUser = "system:serviceaccount:nodepool-system:nodepool-controller"
	adminUser      = "jane@example.com"

	mdPolicy = "nodepool-owns-machinedeployments"
	msPolicy = "nodepool-owns-machinesets"
)

// as is a client that writes as user, an administrator to RBAC (so only the
// policies can refuse it).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fixture is, in a namespace of its own, a pool and the objects it owns
// as the controller and Cluster API make them, and one it does not own.
type fixture struct {
	pool *nodepoolv1.NodePool
	// md is the pool's MachineDeployment (controlled by the pool, labelled
	// with it), ms a MachineSet Cluster API made of it (controlled by md,
	// labelled from its template), inPlace an InPlace pool's MachineSet
	// (controlled by the pool).
	md      *clusterv1.MachineDeployment
	ms      *clusterv1.MachineSet
	inPlace *clusterv1.MachineSet
	// unlabelled is a MachineDeployment the pool controls that lacks the
	// label: the policies follow the owner, not the label.
	unlabelled *clusterv1.MachineDeployment
	// foreign is a MachineDeployment beside them that is not the pool's.
	foreign *clusterv1.MachineDeployment
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	ns := env.NewNamespace(t)
	f := &fixture{pool: stack.WorkersPool(ns, 1)}
	if err := env.Client.Create(ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	poolRef := metav1.OwnerReference{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: f.pool.Name, UID: f.pool.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	labels := func(pool string) map[string]string {
		return map[string]string{clusterv1.ClusterNameLabel: "c1", nodepoolv1.LabelPool: pool}
	}
	f.md = machineDeployment(ns, f.pool.Name, labels(f.pool.Name), poolRef)
	f.unlabelled = machineDeployment(ns, "unlabelled", nil, poolRef)
	f.foreign = machineDeployment(ns, "foreign", nil)
	for _, md := range []*clusterv1.MachineDeployment{f.md, f.unlabelled, f.foreign} {
		if err := env.Client.Create(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	mdRef := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: f.md.Name, UID: f.md.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	msLabels := labels(f.pool.Name)
	msLabels[clusterv1.MachineDeploymentNameLabel] = f.md.Name
	f.ms = machineSet(ns, f.pool.Name+"-7d9f5", msLabels, mdRef)
	f.inPlace = machineSet(ns, "inplace", labels(f.pool.Name), poolRef)
	f.inPlace.Annotations = map[string]string{nodepoolv1.AnnotationInPlaceRolloutAfter: "2026-12-01T10:00:00Z"}
	for _, ms := range []*clusterv1.MachineSet{f.ms, f.inPlace} {
		if err := env.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func machineSpec() clusterv1.MachineSpec {
	return clusterv1.MachineSpec{
		ClusterName: "c1",
		Version:     "v1.36.3",
		Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("workers-userdata-1")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.sim.nodepool.dev", Kind: "SimMachineTemplate", Name: "small",
		},
	}
}

func machineDeployment(ns, name string, labels map[string]string, owners ...metav1.OwnerReference) *clusterv1.MachineDeployment {
	sel := map[string]string{clusterv1.ClusterNameLabel: "c1", "example.com/md": name}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](0),
			Selector:    metav1.LabelSelector{MatchLabels: sel},
			Template:    clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: machineSpec()},
		},
	}
}

func machineSet(ns, name string, labels map[string]string, owners ...metav1.OwnerReference) *clusterv1.MachineSet {
	sel := map[string]string{clusterv1.ClusterNameLabel: "c1", "example.com/ms": name}
	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](0),
			Selector:    metav1.LabelSelector{MatchLabels: sel},
			Template:    clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: machineSpec()},
		},
	}
}

// step is one merge patch and, when the policies refuse it from an
// administrator, what the refusal says besides the namespace (the
// controller and Cluster API are never refused).
type step struct {
	patch string
	// says is "" for a step that is accepted.
	says string
}

// write is what a person does to one of the fixture's objects, in one or
// more patches; policy is the policy that refuses its steps.
type write struct {
	name   string
	object func(*fixture) client.Object
	policy string
	steps  []step
}

const (
	removeLabel  = `{"metadata":{"labels":{"nodepool.dev/pool":null}}}`
	changeLabel  = `{"metadata":{"labels":{"nodepool.dev/pool":"other"}}}`
	rolloutAfter = `{"spec":{"rollout":{"after":"2026-12-05T10:00:00Z"}}}`
	pauseAnn     = `{"metadata":{"annotations":{"cluster.x-k8s.io/paused":""}}}`
	pauseAnnTrue = `{"metadata":{"annotations":{"cluster.x-k8s.io/paused":"true"}}}`
	oldVersion   = `{"spec":{"template":{"spec":{"version":"v1.35.0"}}}}`
	dropOwners   = `{"metadata":{"ownerReferences":null}}`
)

func md(f *fixture) client.Object         { return f.md }
func ms(f *fixture) client.Object         { return f.ms }
func inPlace(f *fixture) client.Object    { return f.inPlace }
func unlabelled(f *fixture) client.Object { return f.unlabelled }

// What the refusals say: the `kubectl nodepool rollout` command to use
// (the namespace follows).
const (
	restart = "`kubectl nodepool rollout restart workers -n "
	pause   = "`kubectl nodepool rollout pause workers -n "
	undo    = "`kubectl nodepool rollout undo workers -n "
	label   = "its label nodepool.dev/pool is its controller's and cannot be removed or changed; roll, pause or undo with `kubectl nodepool rollout restart|pause|undo workers -n "
)

var writes = []write{
	// Issue 41, point 1: the label step, then the rollout.
	{name: "MachineDeployment: the label removed, then spec.rollout.after", object: md, policy: mdPolicy,
		steps: []step{{removeLabel, label}, {rolloutAfter, restart}}},
	{name: "MachineDeployment: the label removed with spec.rollout.after in one patch", object: md, policy: mdPolicy,
		steps: []step{{`{"metadata":{"labels":{"nodepool.dev/pool":null}},"spec":{"rollout":{"after":"2026-12-05T10:00:00Z"}}}`, label}}},
	{name: "MachineDeployment: the label changed, then spec.rollout.after", object: md, policy: mdPolicy,
		steps: []step{{changeLabel, label}, {rolloutAfter, restart}}},
	{name: "MachineDeployment: spec.rollout.after", object: md, policy: mdPolicy,
		steps: []step{{rolloutAfter, restart}}},
	{name: "MachineDeployment: the owner reference removed (the label stays), then spec.rollout.after", object: md, policy: mdPolicy,
		steps: []step{{dropOwners, ""}, {rolloutAfter, restart}, {removeLabel, label}}},
	{name: "MachineDeployment the pool controls, without the label: spec.rollout.after", object: unlabelled, policy: mdPolicy,
		steps: []step{{rolloutAfter, restart}}},
	// Point 2: Cluster API's paused annotation.
	{name: "MachineDeployment: the paused annotation", object: md, policy: mdPolicy,
		steps: []step{{pauseAnn, pause}}},
	{name: "MachineDeployment: the label removed, then the paused annotation", object: md, policy: mdPolicy,
		steps: []step{{removeLabel, label}, {pauseAnnTrue, pause}}},
	{name: "MachineDeployment the pool controls, without the label: the paused annotation", object: unlabelled, policy: mdPolicy,
		steps: []step{{pauseAnnTrue, pause}}},
	{name: "MachineDeployment: spec.paused", object: md, policy: mdPolicy,
		steps: []step{{`{"spec":{"paused":true}}`, pause}}},
	{name: "MachineDeployment: the machine template", object: md, policy: mdPolicy,
		steps: []step{{oldVersion, undo}}},
	// The same on Cluster API's MachineSet of the pool's MachineDeployment.
	{name: "MachineSet: the label removed, then the machine template", object: ms, policy: msPolicy,
		steps: []step{{removeLabel, label}, {oldVersion, undo}}},
	{name: "MachineSet: the label changed", object: ms, policy: msPolicy,
		steps: []step{{changeLabel, label}}},
	{name: "MachineSet: the owner reference removed (the label stays), then the machine template", object: ms, policy: msPolicy,
		steps: []step{{dropOwners, ""}, {oldVersion, undo}}},
	{name: "MachineSet: the paused annotation", object: ms, policy: msPolicy,
		steps: []step{{pauseAnn, pause}}},
	{name: "MachineSet: the label removed, then the paused annotation", object: ms, policy: msPolicy,
		steps: []step{{removeLabel, label}, {pauseAnnTrue, pause}}},
	// An InPlace pool's MachineSet, which the pool controls.
	{name: "InPlace MachineSet: its rollout-after annotation", object: inPlace, policy: msPolicy,
		steps: []step{{`{"metadata":{"annotations":{"update.nodepool.dev/rollout-after":"2026-12-05T10:00:00Z"}}}`, restart}}},
	{name: "InPlace MachineSet: the label removed, then the paused annotation", object: inPlace, policy: msPolicy,
		steps: []step{{removeLabel, label}, {pauseAnn, pause}}},
	{name: "InPlace MachineSet: the machine template", object: inPlace, policy: msPolicy,
		steps: []step{{oldVersion, undo}}},
}

// TestThePoliciesRefuseEveryWriteThatRollsOrHoldsAPoolsMachines: every
// write of issue 41 points 1 and 2 — the label removed (or the owner
// reference) and then a rollout, the paused annotation — on a pool's
// MachineDeployment, on Cluster API's MachineSet of it and on an InPlace
// pool's MachineSet, is refused for an administrator, naming the policy and
// the `kubectl nodepool rollout` command to use; the same writes by the
// controller's ServiceAccount and Cluster API's are accepted.
func TestThePoliciesRefuseEveryWriteThatRollsOrHoldsAPoolsMachines(t *testing.T) {
	waitForPolicies(t)
	ctx := context.Background()
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			f := newFixture(t)
			admin := as(t, adminUser)
			obj := w.object(f)
			for i, s := range w.steps {
				err := admin.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(s.patch)))
				switch {
				case s.says == "" && err != nil:
					t.Fatalf("step %d %s: %v, want accepted", i+1, s.patch, err)
				case s.says != "":
					refused(t, fmt.Sprintf("step %d %s", i+1, s.patch), err, w.policy, s.says+f.pool.Namespace+"`")
				}
			}
			// The controller's and Cluster API's writes pass, on a fresh
			// fixture each.
			for _, user := range []string{controllerUser, stack.ClusterAPIUser} {
				f := newFixture(t)
				c := as(t, user)
				obj := w.object(f)
				for i, s := range w.steps {
					if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(s.patch))); err != nil {
						t.Errorf("as %s, step %d %s: %v, want accepted", user, i+1, s.patch, err)
					}
				}
			}
		})
	}
}

// TestThePoliciesLeaveOtherWritesAlone: writes that roll or hold nothing —
// a note, the replicas, removing the paused annotation a pool's object
// carries — are accepted from an administrator, and an object that is not
// a pool's is none of the policies' business.
func TestThePoliciesLeaveOtherWritesAlone(t *testing.T) {
	waitForPolicies(t)
	ctx := context.Background()
	f := newFixture(t)
	admin := as(t, adminUser)
	for _, c := range []struct {
		what  string
		obj   client.Object
		patch string
	}{
		{"a note on the MachineDeployment", f.md, `{"metadata":{"annotations":{"example.com/note":"seen"}}}`},
		{"a note on the MachineSet", f.ms, `{"metadata":{"annotations":{"example.com/note":"seen"}}}`},
		{"another label on the MachineDeployment", f.md, `{"metadata":{"labels":{"example.com/team":"a"}}}`},
		{"the replicas of the MachineDeployment", f.md, `{"spec":{"replicas":1}}`},
		{"spec.rollout.after on a MachineDeployment that is not a pool's", f.foreign, rolloutAfter},
		{"the paused annotation on a MachineDeployment that is not a pool's", f.foreign, pauseAnn},
		{"the pool label added to a MachineDeployment the pool controls", f.unlabelled, `{"metadata":{"labels":{"nodepool.dev/pool":"workers"}}}`},
	} {
		if err := admin.Patch(ctx, c.obj, client.RawPatch(types.MergePatchType, []byte(c.patch))); err != nil {
			t.Errorf("%s: %v, want accepted", c.what, err)
		}
	}
	// A pause that got there (the controller's drain halt, or written
	// before the policies) may be cleared by anyone, and other writes go
	// on while it is there.
	if err := as(t, controllerUser).Patch(ctx, f.md, client.RawPatch(types.MergePatchType, []byte(pauseAnnTrue))); err != nil {
		t.Fatal(err)
	}
	if err := admin.Patch(ctx, f.md, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"again"}}}`))); err != nil {
		t.Errorf("a note on the paused MachineDeployment: %v, want accepted", err)
	}
	if err := admin.Patch(ctx, f.md, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":null}}}`))); err != nil {
		t.Errorf("removing the paused annotation: %v, want accepted", err)
	}
}

// refused fails unless err is the policy's refusal naming says.
func refused(t *testing.T, what string, err error, policy, says string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want refused by %s", what, policy)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, "ValidatingAdmissionPolicy '"+policy+"'") || !strings.Contains(msg, says) {
		t.Errorf("%s: %v\nwant the refusal of %s saying %s", what, err, policy, says)
		return
	}
	t.Logf("%s: %v", what, err)
}

// waitForPolicies waits until the API server enforces the policies (it
// loads a new policy a moment after it is created): a template change on
// the MachineDeployment and the MachineSet, and deleting the MachineSet.
func waitForPolicies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	admin := as(t, adminUser)
	deadline := time.Now().Add(time.Minute)
	probes := []struct {
		what string
		try  func() error
	}{
		{"a template change on " + f.md.Name, func() error {
			return admin.Patch(ctx, f.md.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(oldVersion)), client.DryRunAll)
		}},
		{"a template change on " + f.ms.Name, func() error {
			return admin.Patch(ctx, f.ms.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(oldVersion)), client.DryRunAll)
		}},
		{"deleting " + f.ms.Name, func() error { return admin.Delete(ctx, f.ms.DeepCopy(), client.DryRunAll) }},
	}
	for _, p := range probes {
		for {
			err := p.try()
			if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the policies do not refuse %s after a minute: %v", p.what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
