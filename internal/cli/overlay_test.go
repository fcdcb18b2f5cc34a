package cli

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// plan -f lays an edited Cluster and template over the live ones, and
// finds the pools that read them.
func TestAnEditedClusterAndTemplateAreReadAsEdited(t *testing.T) {
	w := inputstest.New()
	live := fake.NewClientBuilder().WithScheme(inputstest.Scheme()).
		WithObjects(w.Cluster.DeepCopy(), w.Template.DeepCopy()).Build()
	o := newOverlay(live)
	cluster := w.Cluster.DeepCopy()
	cluster.Spec.ControlPlaneEndpoint.Host = "api-new.prod-1.example"
	tmpl := w.Template.DeepCopy()
	if err := unstructured.SetNestedField(tmpl.Object, int64(8), "spec", "template", "spec", "cpus"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{cluster, tmpl} {
		if err := o.add(obj); err != nil {
			t.Fatal(err)
		}
		if !inputs.References(w.Pool, obj) {
			t.Errorf("the pool does not read %T %s", obj, obj.GetName())
		}
	}
	got := &clusterv1.Cluster{}
	if err := o.Get(context.Background(), client.ObjectKeyFromObject(cluster), got); err != nil || got.Spec.ControlPlaneEndpoint.Host != "api-new.prod-1.example" {
		t.Errorf("Cluster read as %q (%v), want the edited endpoint", got.Spec.ControlPlaneEndpoint.Host, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tmpl.GroupVersionKind())
	if err := o.Get(context.Background(), client.ObjectKeyFromObject(tmpl), u); err != nil {
		t.Fatal(err)
	}
	if cpus, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "cpus"); cpus != 8 {
		t.Errorf("template cpus %d, want the edited 8", cpus)
	}
	other := w.Cluster.DeepCopy()
	other.Name = "prod-2"
	if inputs.References(w.Pool, other) {
		t.Error("a pool does not read another Cluster")
	}
}
