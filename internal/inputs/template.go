package inputs

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// contractLabel is the label on a provider's CRD listing the API versions
// that implement the Cluster API v1beta2 contract, such as "v1alpha1_v1beta1".
var contractLabel = clusterv1.GroupVersion.String()

// TemplateCRDMissing records that no CustomResourceDefinition (crdName)
// serves the kind of spec.infrastructureTemplateRef.
func (a *Assembly) TemplateCRDMissing(crdName string, gk schema.GroupKind) {
	a.fail(invalid("NodePool", a.pool, fieldErr("spec.infrastructureTemplateRef",
		"no CustomResourceDefinition %s for kind %s: install the infrastructure provider or fix apiGroup and kind", crdName, gk)))
}

// TemplateVersion is the API version to read a template at, the way
// Cluster API does: the newest version the CRD's contract label lists.
// ok is false when the CRD has no such label (recorded).
func (a *Assembly) TemplateVersion(crdName string, crdLabels map[string]string) (v string, ok bool) {
	versions := strings.Split(crdLabels[contractLabel], "_")
	sort.Slice(versions, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0 })
	if versions[0] == "" {
		a.fail(invalid("NodePool", a.pool, fieldErr("spec.infrastructureTemplateRef",
			"CustomResourceDefinition %s has no label %s: the provider does not implement the Cluster API v1beta2 contract", crdName, contractLabel)))
		return "", false
	}
	return versions[0], true
}

// TemplateMissing records that the template of spec.infrastructureTemplateRef
// does not exist.
func (a *Assembly) TemplateMissing(ref nodepoolv1.TemplateReference) {
	key := types.NamespacedName{Namespace: a.pool.Namespace, Name: ref.Name}
	a.fail(notFound(ref.Kind, key, "not found: create it or fix spec.infrastructureTemplateRef.name"))
}

// Template reads the infrastructure machine template obj, read at
// version. ok is false when the template is refused (recorded).
func (a *Assembly) Template(ref nodepoolv1.TemplateReference, version string, obj *unstructured.Unstructured) (ok bool) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	spec, ok := obj.Object["spec"]
	if !ok {
		a.fail(invalid(ref.Kind, key, fmt.Errorf("has no spec: it is not an infrastructure machine template")))
		return false
	}
	canonical, err := json.Marshal(spec)
	if err != nil {
		a.fail(invalid(ref.Kind, key, fmt.Errorf("spec cannot be encoded: %w", err)))
		return false
	}
	a.in.InfrastructureTemplate = TemplateInput{APIGroup: ref.APIGroup, Kind: ref.Kind, Version: version, Spec: canonical,
		UID: obj.GetUID(), Generation: obj.GetGeneration()}
	return true
}

// PinTemplate gives the template the spec one of its clones recorded
// (PinnedSpec), when one does. clones are the machine templates of the
// namespace labelled as clones of the template's current generation.
func (a *Assembly) PinTemplate(clones []unstructured.Unstructured) {
	a.PinTemplateSpec(PinnedSpec(clones))
}

// PinTemplateSpec gives the template pinned, the spec a clone of its
// current generation recorded (nil: none does).
func (a *Assembly) PinTemplateSpec(pinned []byte) {
	if pinned != nil {
		a.in.InfrastructureTemplate.Spec, a.in.InfrastructureTemplate.Pinned = pinned, true
	}
}

// PinnedSpec is the spec a template had when a pool's clone of its current
// generation was made, or nil when none of clones records it.
// Only the owner's edits bump a template's generation; a provider upgrade
// that defaults a new field, or serves the kind at a new version, changes
// what the API server returns for the same generation. Reading the
// recorded spec keeps the rollout hash (and the clone) of every pool the
// same through such an upgrade. The record is looked up among all pools'
// clones in the namespace, the oldest first, so every pool of a template
// reads the same spec; a clone's record counts only if the clone is a
// NodePool's and its name is the one the recorded spec hashes to.
func PinnedSpec(list []unstructured.Unstructured) []byte {
	_, spec := PinnedClone(list)
	return spec
}

// PinnedClone is PinnedSpec with the name of the clone whose record it is
// ("" and nil when none records it).
func PinnedClone(list []unstructured.Unstructured) (name string, spec []byte) {
	// Oldest first, then by name; each clone's creation time is parsed
	// once (an unstructured object parses it at every read).
	type clone struct {
		created time.Time
		name    string
		obj     *unstructured.Unstructured
	}
	clones := make([]clone, len(list))
	for i := range list {
		c := &list[i]
		clones[i] = clone{created: c.GetCreationTimestamp().Time, name: c.GetName(), obj: c}
	}
	sort.Slice(clones, func(i, j int) bool {
		if !clones[i].created.Equal(clones[j].created) {
			return clones[i].created.Before(clones[j].created)
		}
		return clones[i].name < clones[j].name
	})
	for _, cl := range clones {
		if spec, ok := RecordedSpec(cl.obj); ok {
			return cl.name, spec
		}
	}
	return "", nil
}

// RecordedSpec is the template spec clone recorded, if its record counts:
// the clone is a NodePool's, not being deleted, and named after the spec.
func RecordedSpec(c *unstructured.Unstructured) ([]byte, bool) {
	spec := []byte(c.GetAnnotations()[nodepoolv1.AnnotationTemplateSourceSpec])
	if c.GetDeletionTimestamp() != nil || !ownedByANodePool(c) || !json.Valid(spec) ||
		!namedAfter(c.GetName(), TemplateInput{Spec: spec}.Hash()) {
		return nil, false
	}
	return spec, true
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
