package testinfra

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// Group and version of the test provider's types.
const (
	Group   = "test.nodepool.dev"
	Version = "v1alpha1"
)

// Kinds of the test provider.
const (
	KindMachine         = "TestMachine"
	KindMachineTemplate = "TestMachineTemplate"
	KindControlPlane    = "TestControlPlane"
)

// GVK returns the group, version and kind of one of the test provider's kinds.
func GVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: Version, Kind: kind}
}

// CRDs returns the test provider's CRDs, labelled with the Cluster API
// contract they follow.
func CRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		crd(KindMachine, "infrastructure"),
		crd(KindMachineTemplate, "infrastructure"),
		crd(KindControlPlane, "control-plane"),
	}
}

func crd(kind, role string) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	open := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name: plural + "." + Group,
			Labels: map[string]string{
				"cluster.x-k8s.io/v1beta2":  Version,
				"cluster.x-k8s.io/provider": role + "-test",
			},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind),
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       *open,
						"status":     *open,
					},
				}},
			}},
		},
	}
}
