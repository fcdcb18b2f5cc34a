// Package v1alpha1 holds the owner-facing NodePool API (nodepool.dev/v1alpha1):
// its spec and status, the validation the API server enforces, and the
// vocabulary of conditions, reasons, labels and annotations the controller uses.
// +kubebuilder:object:generate=true
// +groupName=nodepool.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of NodePool.
	GroupVersion = schema.GroupVersion{Group: "nodepool.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
