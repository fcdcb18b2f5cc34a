package inputs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	t := &TemplateInput{APIGroup: ref.APIGroup, Kind: ref.Kind, Version: versions[0], Spec: canonical,
		UID: obj.GetUID(), Generation: obj.GetGeneration()}
	pinned, err := g.pinnedTemplateSpec(ctx, obj)
	if err != nil {
		return nil, err
	}
	if pinned != nil {
		t.Spec, t.Pinned = pinned, true
	}
	return t, nil
}

// pinnedTemplateSpec is the spec the template had when a pool's clone of
// its current generation was made, or nil when no clone records it.
// Only the owner's edits bump a template's generation; a provider upgrade
// that defaults a new field, or serves the kind at a new version, changes
// what the API server returns for the same generation. Reading the
// recorded spec keeps the rollout hash (and the clone) of every pool the
// same through such an upgrade. The record is looked up among all pools'
// clones in the namespace, the oldest first, so every pool of a template
// reads the same spec; a clone's record counts only if the clone is a
// NodePool's and its name is the one the recorded spec hashes to.
func (g *gatherer) pinnedTemplateSpec(ctx context.Context, tmpl *unstructured.Unstructured) ([]byte, error) {
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
	// Oldest first, then by name; each clone's creation time is parsed
	// once (an unstructured object parses it at every read).
	type clone struct {
		created time.Time
		name    string
		obj     *unstructured.Unstructured
	}
	clones := make([]clone, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		clones[i] = clone{created: c.GetCreationTimestamp().Time, name: c.GetName(), obj: c}
	}
	sort.Slice(clones, func(i, j int) bool {
		if !clones[i].created.Equal(clones[j].created) {
			return clones[i].created.Before(clones[j].created)
		}
		return clones[i].name < clones[j].name
	})
	for _, cl := range clones {
		c := cl.obj
		spec := []byte(c.GetAnnotations()[nodepoolv1.AnnotationTemplateSourceSpec])
		if c.GetDeletionTimestamp() != nil || !ownedByANodePool(c) || !json.Valid(spec) ||
			!namedAfter(c.GetName(), TemplateInput{Spec: spec}.Hash()) {
			continue
		}
		return spec, nil
	}
	return nil, nil
}

// ownedByANodePool reports whether a NodePool is o's controller.
func ownedByANodePool(o metav1.Object) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.Kind == "NodePool" && strings.HasPrefix(ref.APIVersion, nodepoolv1.GroupVersion.Group+"/")
}

// namedAfter reports whether a clone's name ends in a prefix of hash (at
// least 8 characters), as the names the controller gives clones do.
func namedAfter(name, hash string) bool {
	i := strings.LastIndexByte(name, '-')
	suffix := name[i+1:]
	return i >= 0 && len(suffix) >= 8 && strings.HasPrefix(hash, suffix)
}
