package gather

import (
	"context"
	"fmt"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// gatherTemplate reads the infrastructure machine template of a pool the way
// Cluster API does: the CRD's contract label says which API version to read.
func (g *gatherer) gatherTemplate(ctx context.Context, pool *nodepoolv1.NodePool) error {
	ref := pool.Spec.InfrastructureTemplateRef
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	crdName := contract.CalculateCRDName(gk.Group, gk.Kind)
	if err := g.c.Get(ctx, types.NamespacedName{Name: crdName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			g.a.TemplateCRDMissing(crdName, gk)
			return nil
		}
		return fmt.Errorf("reading CustomResourceDefinition %s: %w", crdName, err)
	}
	version, ok := g.a.TemplateVersion(crdName, crd.GetLabels())
	if !ok {
		return nil
	}

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gk.WithVersion(version))
	key := types.NamespacedName{Namespace: g.a.Pool().Namespace, Name: ref.Name}
	if err := g.c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			g.a.TemplateMissing(ref)
			return nil
		}
		return fmt.Errorf("reading %s %s: %w", ref.Kind, key, err)
	}
	if !g.a.Template(ref, version, obj) {
		return nil
	}
	if pins, ok := g.c.(TemplatePins); ok {
		spec, err := pins.PinnedTemplateSpec(ctx, obj, func() ([]unstructured.Unstructured, error) { return g.clones(ctx, obj) })
		if err != nil {
			return err
		}
		g.a.PinTemplateSpec(spec)
		return nil
	}
	clones, err := g.clones(ctx, obj)
	if err != nil {
		return err
	}
	g.a.PinTemplate(clones)
	return nil
}

// TemplatePins is a reader that knows which spec is pinned for a
// template's current generation (inputs.PinnedSpec) without listing
// every clone of it at each read: clones lists them when it must. Every
// pool of a template in the namespace has a clone of it, so a list per
// read costs what the number of pools does.
type TemplatePins interface {
	PinnedTemplateSpec(ctx context.Context, tmpl *unstructured.Unstructured, clones func() ([]unstructured.Unstructured, error)) ([]byte, error)
}

// clones lists the pools' clones of the template's current generation
// (inputs.PinnedSpec says which one's record counts).
func (g *gatherer) clones(ctx context.Context, tmpl *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	if tmpl.GetGeneration() == 0 || tmpl.GetUID() == "" {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tmpl.GroupVersionKind().GroupVersion().WithKind(tmpl.GetKind() + "List"))
	// The clones are only read: a cache-backed reader hands out its own
	// objects rather than copies of every pool's clone.
	err := g.c.List(ctx, list, client.InNamespace(tmpl.GetNamespace()), client.MatchingLabels{
		nodepoolv1.LabelTemplateSourceUID:        string(tmpl.GetUID()),
		nodepoolv1.LabelTemplateSourceGeneration: strconv.FormatInt(tmpl.GetGeneration(), 10),
	}, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, fmt.Errorf("reading the clones of %s %s/%s: %w", tmpl.GetKind(), tmpl.GetNamespace(), tmpl.GetName(), err)
	}
	return list.Items, nil
}
