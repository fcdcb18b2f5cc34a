package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
