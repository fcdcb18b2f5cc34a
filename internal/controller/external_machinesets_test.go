package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// An edited MachineSet of a Replace pool is restored from the
// MachineDeployment's template only when that was its template: it was the
// pool's newest MachineSet when it was written (one Cluster API made after
// the write, taking it for old, does not count), and the fields nobody
// outside wrote are the template's. An older MachineSet's edit is
// recorded only, saying why.
func TestAnEditedMachineSetIsRestoredOnlyWhenItsTemplateWasTheMachineDeployments(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	spec := clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.36.3", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("workers-abc-userdata")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.sim.nodepool.dev", Kind: "SimMachineTemplate", Name: "workers-abc"}}
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Template: clusterv1.MachineTemplateSpec{Spec: spec}}}
	set := func(name string, revision string, created time.Time, edit func(*clusterv1.MachineSpec)) clusterv1.MachineSet {
		ms := clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created),
			Annotations: map[string]string{clusterv1.RevisionAnnotation: revision}}}
		ms.Spec.Template.Spec = *spec.DeepCopy()
		if edit != nil {
			edit(&ms.Spec.Template.Spec)
		}
		return ms
	}
	version := func(s *clusterv1.MachineSpec) { s.Version = "v1.99.0" }
	older := func(s *clusterv1.MachineSpec) {
		s.Version = "v1.99.0"
		s.Bootstrap.DataSecretName = ptr.To("workers-old-userdata")
	}
	x := &externalChange{manager: "kubectl-patch", at: at, fields: []string{"spec.template.spec.version"}}
	for _, c := range []struct {
		name    string
		sets    []clusterv1.MachineSet
		restore bool
		why     string
	}{
		{"the newest MachineSet", []clusterv1.MachineSet{set("a", "2", at.Add(-time.Hour), version)}, true, ""},
		{"the newest when written; Cluster API made one since", []clusterv1.MachineSet{set("a", "2", at.Add(-time.Hour), version), set("b", "3", at.Add(time.Second), nil)}, true, ""},
		{"an older MachineSet", []clusterv1.MachineSet{set("a", "2", at.Add(-time.Hour), version), set("b", "3", at.Add(-time.Minute), nil)}, false, "b is newer"},
		{"one made from another template", []clusterv1.MachineSet{set("a", "2", at.Add(-time.Hour), older)}, false, "spec.template.spec.bootstrap"},
	} {
		why := restorable(&c.sets[0], c.sets, md, x)
		if (why == "") != c.restore || !strings.Contains(why, c.why) {
			t.Errorf("%s: restorable says %q, want restored %v (%q)", c.name, why, c.restore, c.why)
		}
	}
}

// Cluster API applies a MachineSet whole from its cache: an apply read
// before the controller's restore writes the edit back, under Cluster
// API's own field manager. The values the controller restored are recorded
// on the MachineSet, so it restores them again while the MachineDeployment
// still holds them, and only then: once the pool's own template moved on,
// the MachineSet is an old one.
func TestAnEditClusterAPIWroteBackOverTheRestoreIsRestoredAgain(t *testing.T) {
	spec := clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.36.3", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("workers-abc-userdata")}}
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Template: clusterv1.MachineTemplateSpec{Spec: spec}}}
	set := func(version, record string) *clusterv1.MachineSet {
		ms := &clusterv1.MachineSet{}
		ms.Spec.Template.Spec = *spec.DeepCopy()
		ms.Spec.Template.Spec.Version = version
		if record != "" {
			ms.Annotations = map[string]string{nodepoolv1.AnnotationRestoredTemplate: record}
		}
		return ms
	}
	moved := md.DeepCopy()
	moved.Spec.Template.Spec.Version = "v1.37.0"
	for _, c := range []struct {
		name string
		ms   *clusterv1.MachineSet
		md   *clusterv1.MachineDeployment
		want []string
	}{
		{"written back", set("v1.99.0", `{"spec.template.spec.version":"v1.36.3"}`), md, []string{"spec.template.spec.version"}},
		{"still restored", set("v1.36.3", `{"spec.template.spec.version":"v1.36.3"}`), md, nil},
		{"never restored", set("v1.99.0", ""), md, nil},
		{"the pool's template moved on", set("v1.36.3", `{"spec.template.spec.version":"v1.36.3"}`), moved, nil},
		{"a record of another field", set("v1.99.0", `{"spec.template.spec.failureDomain":"zone-a"}`), md, nil},
		{"an unreadable record", set("v1.99.0", `{`), md, nil},
	} {
		if got := writtenBack(c.ms, c.md); !slices.Equal(got, c.want) {
			t.Errorf("%s: writtenBack = %v, want %v", c.name, got, c.want)
		}
	}
}
