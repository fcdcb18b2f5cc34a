package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

const (
	simTemplateCRD = "simmachinetemplates.infrastructure.sim.nodepool.dev"
	simMachineCRD  = "simmachines.infrastructure.sim.nodepool.dev"
)

// crdClient reads and writes CustomResourceDefinitions (the suite's scheme
// does not know them).
func crdClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// upgradeSimTemplateCRD plays an infrastructure provider upgrade on the
// sim's template CRD: change edits its versions. The CRD as it was is
// restored when the test ends (every other test's templates read it).
func upgradeSimTemplateCRD(t *testing.T, change func(crd *apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	upgradeSimCRD(t, simTemplateCRD, change)
}

// upgradeSimCRD changes the sim's CRD name, restored when the test ends.
func upgradeSimCRD(t *testing.T, name string, change func(crd *apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	ctx := context.Background()
	c := crdClient(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.DeepCopy()
	t.Cleanup(func() {
		restore := &apiextensionsv1.CustomResourceDefinition{}
		for range 20 {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, restore); err != nil {
				t.Error(err)
				return
			}
			restore.Labels, restore.Spec.Versions = original.Labels, original.Spec.Versions
			if err := c.Update(ctx, restore); err == nil {
				return
			}
		}
		t.Errorf("could not restore CRD %s", name)
	})
	for i := 0; ; i++ {
		change(crd)
		err := c.Update(ctx, crd)
		if err == nil {
			break
		}
		if i == 20 {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
	}
	stack.WaitFor(t, 60*time.Second, "the upgraded CRD "+name+" established", func() *apiextensionsv1.CustomResourceDefinition {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return cond.ObservedGeneration == 0 || cond.ObservedGeneration == c.Generation
			}
		}
		return false
	}, func(c *apiextensionsv1.CustomResourceDefinition) string { return c.Name })
}

// withDefaultedZone adds a field with a default to every version's
// template spec, the way a provider release adds a defaulted field.
func withDefaultedZone(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		tmpl := spec.Properties["template"]
		inner := tmpl.Properties["spec"]
		inner.Properties["zone"] = apiextensionsv1.JSONSchemaProps{Type: "string",
			Default: &apiextensionsv1.JSON{Raw: []byte(`"zone-a"`)}}
		tmpl.Properties["spec"] = inner
		spec.Properties["template"] = tmpl
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
}

// withMachineZone adds the same field to the machines' spec: Cluster API
// makes machines from the template's spec, so a provider release adds a
// field to both kinds.
func withMachineZone(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["zone"] = apiextensionsv1.JSONSchemaProps{Type: "string",
			Default: &apiextensionsv1.JSON{Raw: []byte(`"zone-a"`)}}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
}

// withNewServedVersion serves v1alpha2, the same schema, and says in the
// contract label that it implements the contract, so Cluster API and
// nodepool read the template at v1alpha2 from now on.
func withNewServedVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	v2 := *crd.Spec.Versions[0].DeepCopy()
	v2.Name, v2.Storage = "v1alpha2", false
	crd.Spec.Versions = append(crd.Spec.Versions, v2)
	crd.Labels["cluster.x-k8s.io/v1beta2"] = "v1alpha1_v1alpha2"
}

// touchTemplate changes only the template's metadata, so every watch sees
// the object as the upgraded CRD now serves it.
func touchTemplate(t *testing.T, ns, name, value string) {
	t.Helper()
	tmpl := &simv1.SimMachineTemplate{}
	tmpl.Namespace, tmpl.Name = ns, name
	stack.Update(t, env.Client, tmpl, func(m *simv1.SimMachineTemplate) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations["example.com/touched"] = value
	})
}

// templateSpecAsServed is the template's spec as the API server serves it.
func templateSpecAsServed(t *testing.T, ns, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(simv1.GroupVersion.WithKind("SimMachineTemplate"))
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(u.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAProviderUpgradeOfTheTemplateRollsNoPoolButAnOwnerEditStillDoes(t *testing.T) {
	// The controller's caches and informers of the upgraded kind start
	// afresh for the tests after this one (last cleanup to run).
	t.Cleanup(func() { st.MustRestartController(t, settings) })
	p := st.NewPool(t, "workers", 2)
	before := st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes", stack.PoolSettled(2))
	clones := clonesOf(t, p)
	userData := currentUserData(t, p).Name
	servedBefore := templateSpecAsServed(t, p.Namespace, "small")
	nothingMoved := func(what, label string) {
		t.Helper()
		// A spec change that rolls nothing makes the controller reconcile
		// the pool on the upgraded inputs; observedGeneration says it did.
		stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
			p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/after": nodepoolv1.LabelValue(label)}
		})
		st.WaitForPool(t, p, stack.RolloutTimeout, "the controller reconciled "+what, func(s stack.PoolState) bool {
			return s.Pool.Status.ObservedGeneration == s.Pool.Generation && stack.PoolSettled(2)(s)
		})
		st.HoldsFor(t, p, 5*time.Second, "no machine replaced after "+what, func(s stack.PoolState) bool {
			return s.Machines.Equal(before.Machines) && s.Pool.Status.Updating == ""
		})
		if got := clonesOf(t, p); !sets.New(clones...).IsSuperset(sets.New(got...)) {
			t.Fatalf("after %s the pool's template clones are %v, want no other than %v", what, got, clones)
		}
		if got := currentUserData(t, p).Name; got != userData {
			t.Fatalf("after %s the MachineDeployment boots %s, want %s", what, got, userData)
		}
	}

	// A provider upgrade comes with restarts: the controller then reads
	// every template afresh, with no render it remembers.
	upgradeSimCRD(t, simMachineCRD, withMachineZone)
	upgradeSimTemplateCRD(t, withDefaultedZone)
	touchTemplate(t, p.Namespace, "small", "defaulted")
	st.MustRestartController(t, settings)
	if served := templateSpecAsServed(t, p.Namespace, "small"); served == servedBefore {
		t.Fatalf("the upgraded CRD serves the template unchanged (%s): the test does not upgrade anything", served)
	}
	nothingMoved("a defaulted field", "defaulted")

	tmpl := &simv1.SimMachineTemplate{}
	tmpl.Namespace, tmpl.Name = p.Namespace, "small"
	stack.Update(t, env.Client, tmpl, func(m *simv1.SimMachineTemplate) { m.Spec.Template.Spec.CPUs = 4 })
	st.WaitForPool(t, p, stack.RolloutTimeout, "every machine replaced after the owner's template edit", func(s stack.PoolState) bool {
		return stack.PoolSettled(2)(s) && s.Machines.Intersection(before.Machines).Len() == 0
	})
	if got := currentUserData(t, p).Name; got == userData {
		t.Fatalf("the owner's template edit left the MachineDeployment on %s", got)
	}

	// Last, as no machine is made after it: the suite's Cluster API
	// controllers are not restarted, as a provider upgrade would, to learn
	// the new version.
	before, clones, userData = st.Observe(t, p), clonesOf(t, p), currentUserData(t, p).Name
	upgradeSimTemplateCRD(t, withNewServedVersion)
	touchTemplate(t, p.Namespace, "small", "v1alpha2")
	st.MustRestartController(t, settings)
	nothingMoved("a new served version", "v1alpha2")
}
