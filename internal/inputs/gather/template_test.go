package gather_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// templateClone is a clone as the controller makes it: labelled with its
// source's UID and generation, holding the source's spec then.
func templateClone(name, uid string, generation string, spec []byte, owner *metav1.OwnerReference) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetAPIVersion("infrastructure.sim.nodepool.dev/v1alpha1")
	c.SetKind("SimMachineTemplate")
	c.SetNamespace(inputstest.Namespace)
	c.SetName(name)
	c.SetLabels(map[string]string{nodepoolv1.LabelTemplateSourceUID: uid, nodepoolv1.LabelTemplateSourceGeneration: generation})
	c.SetAnnotations(map[string]string{nodepoolv1.AnnotationTemplateSourceSpec: string(spec)})
	if owner != nil {
		c.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	c.Object["spec"] = map[string]any{}
	return c
}

func TestASameGenerationTemplateReadsAsTheSpecItsCloneWasMadeFrom(t *testing.T) {
	pool := &metav1.OwnerReference{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: "workers",
		UID: "pool-uid", Controller: new(true)}
	foreign := &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "x", UID: "x", Controller: new(true)}
	// What the template was when cloned; served now with a defaulted field.
	was := []byte(`{"template":{"spec":{"cpus":2,"memory":"4Gi"}}}`)
	hash := inputs.TemplateInput{Spec: was}.Hash()
	name := "workers-" + hash[:16]
	for _, tc := range []struct {
		name   string
		clone  *unstructured.Unstructured
		pinned bool
	}{
		{"the clone of this generation is read", templateClone(name, "tmpl-uid", "3", was, pool), true},
		{"a clone of an older generation is not", templateClone(name, "tmpl-uid", "2", was, pool), false},
		{"a clone of another template is not", templateClone(name, "other-uid", "3", was, pool), false},
		{"a clone whose name is not its spec's is not", templateClone("workers-0123456789abcdef", "tmpl-uid", "3", was, pool), false},
		{"an object no NodePool owns is not", templateClone(name, "tmpl-uid", "3", was, foreign), false},
		{"a record that is not JSON is not", templateClone(name, "tmpl-uid", "3", []byte("{"), pool), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Template.SetUID(types.UID("tmpl-uid"))
			w.Template.SetGeneration(3)
			w.Template.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
				"cpus": int64(2), "memory": "4Gi", "zone": "zone-a"}}}
			w.Extra = []client.Object{tc.clone}
			in, err := gather.Gather(context.Background(), w.Client(), w.Pool, w.Settings)
			if err != nil {
				t.Fatal(err)
			}
			got := in.InfrastructureTemplate
			if got.Pinned != tc.pinned {
				t.Fatalf("pinned %v, want %v (spec %s)", got.Pinned, tc.pinned, got.Spec)
			}
			want := was
			if !tc.pinned {
				want, _ = json.Marshal(w.Template.Object["spec"])
			}
			if string(got.Spec) != string(want) {
				t.Errorf("spec %s, want %s", got.Spec, want)
			}
			if got.UID != "tmpl-uid" || got.Generation != 3 {
				t.Errorf("source %s/%d, want tmpl-uid/3", got.UID, got.Generation)
			}
		})
	}
}

func TestTheOldestCloneRecordIsTheOneEveryPoolReads(t *testing.T) {
	pool := &metav1.OwnerReference{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool", Name: "workers",
		UID: "pool-uid", Controller: new(true)}
	older := []byte(`{"template":{"spec":{"cpus":2}}}`)
	newer := []byte(`{"template":{"spec":{"cpus":2,"zone":"zone-a"}}}`)
	named := func(spec []byte, prefix string, created time.Time) *unstructured.Unstructured {
		c := templateClone(prefix+"-"+inputs.TemplateInput{Spec: spec}.Hash()[:16], "tmpl-uid", "3", spec, pool)
		c.SetCreationTimestamp(metav1.NewTime(created))
		return c
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		clones []client.Object
		want   []byte
	}{
		{"the older one", []client.Object{named(newer, "a", t0.Add(time.Hour)), named(older, "b", t0)}, older},
		{"the same age: the first by name", []client.Object{named(newer, "b", t0), named(older, "a", t0)}, older},
		{"the same age, other names", []client.Object{named(newer, "a", t0), named(older, "b", t0)}, newer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			w.Template.SetUID(types.UID("tmpl-uid"))
			w.Template.SetGeneration(3)
			w.Extra = tc.clones
			in, err := gather.Gather(context.Background(), w.Client(), w.Pool, w.Settings)
			if err != nil {
				t.Fatal(err)
			}
			if got := in.InfrastructureTemplate.Spec; string(got) != string(tc.want) {
				t.Fatalf("read %s, want %s", got, tc.want)
			}
		})
	}
}
