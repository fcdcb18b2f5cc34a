package inputs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// contractLabel is the label on a provider's CRD listing the API versions
// that implement the Cluster API v1beta2 contract, such as "v1alpha1_v1beta1".
var contractLabel = clusterv1.GroupVersion.String()

// gatherTemplate reads the infrastructure machine template of a pool the way
// Cluster API does: the CRD's contract label says which API version to read.
// It returns (nil, nil) when the problem is the pool's (recorded in g).
func (g *gatherer) gatherTemplate(ctx context.Context, ref nodepoolv1.TemplateReference) (*TemplateInput, error) {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	crdName := contract.CalculateCRDName(gk.Group, gk.Kind)
	if err := g.c.Get(ctx, types.NamespacedName{Name: crdName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			g.fail(invalid("NodePool", g.pool, fieldErr("spec.infrastructureTemplateRef",
				"no CustomResourceDefinition %s for kind %s: install the infrastructure provider or fix apiGroup and kind", crdName, gk)))
			return nil, nil
		}
		return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", crdName, err)
	}
	versions := strings.Split(crd.GetLabels()[contractLabel], "_")
	sort.Slice(versions, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0 })
	if versions[0] == "" {
		g.fail(invalid("NodePool", g.pool, fieldErr("spec.infrastructureTemplateRef",
			"CustomResourceDefinition %s has no label %s: the provider does not implement the Cluster API v1beta2 contract", crdName, contractLabel)))
		return nil, nil
	}

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gk.WithVersion(versions[0]))
	key := types.NamespacedName{Namespace: g.pool.Namespace, Name: ref.Name}
	if err := g.c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			g.fail(notFound(ref.Kind, key, "not found: create it or fix spec.infrastructureTemplateRef.name"))
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, key, err)
	}
	spec, ok := obj.Object["spec"]
	if !ok {
		g.fail(invalid(ref.Kind, key, fmt.Errorf("has no spec: it is not an infrastructure machine template")))
		return nil, nil
	}
	canonical, err := json.Marshal(spec)
	if err != nil {
		g.fail(invalid(ref.Kind, key, fmt.Errorf("spec cannot be encoded: %w", err)))
		return nil, nil
	}
	return &TemplateInput{APIGroup: ref.APIGroup, Kind: ref.Kind, Version: versions[0], Spec: canonical}, nil
}
