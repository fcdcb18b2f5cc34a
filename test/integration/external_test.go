package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/test/stack"
)

// TestAnExternalRolloutOnThePoolsMachineDeploymentIsRecordedAndReverted:
// without the admission policies (this stack installs none), an
// administrator writes the knobs of a pool's MachineDeployment that roll or
// hold its machines: spec.rollout.after, spec.paused, Cluster API's paused
// annotation and the template's version, in one patch as `kubectl patch`
// would. The controller records it in the pool's history (initiator
// external, the field manager and time from managedFields), emits a
// Warning event, says it in status.rollout.external, and restores its own
// values; the pause held Cluster API, so no machine is replaced.
func TestAnExternalRolloutOnThePoolsMachineDeploymentIsRecordedAndReverted(t *testing.T) {
	ctx := context.Background()
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	records := len(st.HistoryOf(t, p))
	md := machineDeploymentOf(t, p)
	version := md.Spec.Template.Spec.Version

	const manager = "kubectl-patch"
	written := time.Now().Truncate(time.Second)
	after := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}},"spec":{"paused":true,"rollout":{"after":%q},"template":{"spec":{"version":"v1.99.0"}}}}`,
		clusterv1.PausedAnnotation, after)
	if err := env.Client.Patch(ctx, md, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(manager)); err != nil {
		t.Fatalf("patching the MachineDeployment as an administrator: %v", err)
	}

	// The controller's values are back.
	stack.WaitFor(t, stack.RolloutTimeout, "the MachineDeployment restored", func() *clusterv1.MachineDeployment { return machineDeploymentOf(t, p) },
		func(md *clusterv1.MachineDeployment) bool {
			_, paused := md.Annotations[clusterv1.PausedAnnotation]
			return !paused && !ptr.Deref(md.Spec.Paused, false) && md.Spec.Rollout.After.IsZero() && md.Spec.Template.Spec.Version == version
		}, func(md *clusterv1.MachineDeployment) string {
			return fmt.Sprintf("annotations %v, paused %v, rollout.after %v, version %s", md.Annotations, md.Spec.Paused, md.Spec.Rollout.After, md.Spec.Template.Spec.Version)
		})

	want := []string{"metadata.annotations[cluster.x-k8s.io/paused]", "spec.paused", "spec.rollout.after", "spec.template.spec.version"}
	recordedAndSaid(t, p, records, manager, written, want, "MachineDeployment "+md.Name)

	// The pause held Cluster API: the restore replaced no machine.
	st.HoldsFor(t, p, 8*time.Second, "no machine replaced", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines)
	})
}

// machineSetsOf lists the MachineSets Cluster API made of the pool's
// MachineDeployment, not being deleted.
func machineSetsOf(t *testing.T, p *nodepoolv1.NodePool) []clusterv1.MachineSet {
	t.Helper()
	md := machineDeploymentOf(t, p)
	list := &clusterv1.MachineSetList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []clusterv1.MachineSet
	for _, ms := range list.Items {
		if metav1.IsControlledBy(&ms, md) && ms.DeletionTimestamp == nil {
			out = append(out, ms)
		}
	}
	return out
}

// TestAnExternalEditOfThePoolsMachineSetIsRecordedAndReverted: without the
// admission policies, an administrator edits the machine template of the
// MachineSet Cluster API made of a Replace pool's MachineDeployment (its
// version, as `kubectl patch` would). Cluster API would take it for an old
// MachineSet and replace its machines. The controller records it (initiator
// external, the field manager and time from managedFields), emits a
// Warning event, says it in status.rollout.external, and writes the
// MachineDeployment's template values back on the MachineSet, which Cluster
// API then keeps as the pool's: its machines are kept. The pool replaces
// OnDelete, so Cluster API replaces no machine by itself meanwhile: under
// RollingUpdate the restore races Cluster API's replacement, which on a
// loaded machine can finish (new machines ready, the edited MachineSet
// deleted) within seconds, before the controller has looked.
func TestAnExternalEditOfThePoolsMachineSetIsRecordedAndReverted(t *testing.T) {
	ctx := context.Background()
	p := st.NewPoolWith(t, "workers", 2, func(_ string, p *nodepoolv1.NodePool) {
		p.Spec.Management.Replace.Strategy = nodepoolv1.ReplaceStrategyOnDelete
	})
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	records := len(st.HistoryOf(t, p))
	version := machineDeploymentOf(t, p).Spec.Template.Spec.Version
	sets := machineSetsOf(t, p)
	if len(sets) != 1 {
		t.Fatalf("%d MachineSets of the settled pool, want 1", len(sets))
	}
	ms := &sets[0]

	const manager = "kubectl-patch"
	written := time.Now().Truncate(time.Second)
	if err := env.Client.Patch(ctx, ms, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"version":"v1.99.0"}}}}`)), client.FieldOwner(manager)); err != nil {
		t.Fatalf("patching the MachineSet as an administrator: %v", err)
	}

	// The MachineDeployment's values are back on the MachineSet.
	stack.WaitFor(t, stack.RolloutTimeout, "the MachineSet restored", func() *clusterv1.MachineSet {
		got := &clusterv1.MachineSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			t.Fatal(err)
		}
		return got
	}, func(got *clusterv1.MachineSet) bool { return got.Spec.Template.Spec.Version == version },
		func(got *clusterv1.MachineSet) string { return describeSet(t, p, got) })

	recordedAndSaid(t, p, records, manager, written, []string{"spec.template.spec.version"}, "MachineSet "+ms.Name)

	// Cluster API keeps the restored MachineSet as the pool's: its machines
	// stay (a MachineSet it made meanwhile is scaled away).
	st.WaitForPool(t, p, stack.RolloutTimeout, "the pool settled on its machines", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Equal(before.Machines)
	})
	st.HoldsFor(t, p, 5*time.Second, "no machine replaced", func(s stack.PoolState) bool {
		return s.Machines.Equal(before.Machines)
	})
}

// describeSet says what a wait on a MachineSet last saw: its version and
// managers, the pool's MachineSets, and what the pool says of an external
// change.
func describeSet(t *testing.T, p *nodepoolv1.NodePool, ms *clusterv1.MachineSet) string {
	t.Helper()
	var managers, sets []string
	for _, e := range ms.ManagedFields {
		managers = append(managers, fmt.Sprintf("%s/%s@%v", e.Manager, e.Operation, e.Time))
	}
	for _, o := range machineSetsOf(t, p) {
		sets = append(sets, fmt.Sprintf("%s(rev %s, version %s, replicas %d, created %v)", o.Name, o.Annotations[clusterv1.RevisionAnnotation],
			o.Spec.Template.Spec.Version, ptr.Deref(o.Spec.Replicas, -1), o.CreationTimestamp))
	}
	got := &nodepoolv1.NodePool{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	var external any
	if got.Status.Rollout != nil {
		external = got.Status.Rollout.External
	}
	return fmt.Sprintf("version %s, managers %v; MachineSets %v; status.rollout.external %+v", ms.Spec.Template.Spec.Version, managers, sets, external)
}

// recordedAndSaid checks that the pool's history ends with one record more
// than records: the external change manager wrote at written (from
// managedFields) of fields, restored; and that status.rollout.external and
// a Warning event ExternalChangeReverted say it, naming object.
func recordedAndSaid(t *testing.T, p *nodepoolv1.NodePool, records int, manager string, written time.Time, fields []string, object string) {
	t.Helper()
	e := st.LastRecord(t, p, history.InitiatorExternal, history.OutcomeReverted)
	if got := slices.Sorted(slices.Values(e.Fields)); e.Manager != manager || !slices.Equal(got, fields) {
		t.Errorf("the record says manager %q, fields %v; want %q, %v", e.Manager, got, manager, fields)
	}
	if e.Started.Before(written.Add(-time.Second)) || e.Started.After(time.Now()) {
		t.Errorf("the record says the change was written at %v, want managedFields' time (about %v)", e.Started, written)
	}
	if n := len(st.HistoryOf(t, p)); n != records+1 {
		t.Errorf("%d records after the external change, want %d (one)", n, records+1)
	}
	s := st.WaitForPool(t, p, stack.RolloutTimeout, "status.rollout.external", func(s stack.PoolState) bool {
		return s.Pool.Status.Rollout != nil && s.Pool.Status.Rollout.External != nil
	})
	if x := s.Pool.Status.Rollout.External; x.Manager != manager || x.Revision != e.Revision || len(x.Fields) != len(fields) ||
		!strings.Contains(x.Message, "restored") || !strings.Contains(x.Message, object) {
		t.Errorf("status.rollout.external = %+v, want manager %q, revision %d, the fields, %s and what was done", *x, manager, e.Revision, object)
	}
	evs := stack.PoolEvents(t, env.Client, p, nodepoolv1.EventExternalChangeReverted)
	if len(evs) == 0 || !strings.Contains(evs[0], manager) || !strings.Contains(evs[0], fields[len(fields)-1]) {
		t.Errorf("events %s: %q, want one naming %s and the fields", nodepoolv1.EventExternalChangeReverted, evs, manager)
	}
}
