package inputs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// Object is an API object (a controller-runtime client.Object is one); the
// package names it itself so that it imports no client.
type Object interface {
	metav1.Object
	runtime.Object
}

// SourceDigest is the digest Gather records in Inputs.Sources for a
// ConfigMap or Secret: "sha256:<hex>" over its data in canonical form. The
// rollout history keeps it per revision; `kubectl nodepool rollout undo`
// compares it with the object's current content.
func SourceDigest(obj Object) (string, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return dataDigest(o.Data, o.BinaryData), nil
	case *corev1.Secret:
		return dataDigest(nil, o.Data), nil
	}
	return "", fmt.Errorf("%T is not a ConfigMap or Secret: only their content is recorded", obj)
}

// References reports whether pool reads obj, an object of its namespace,
// as an input: a user config of spec.config, the trust bundle, the pull
// secret, its Cluster or its infrastructure machine template. (Every pool
// also reads the management config.)
func References(pool *nodepoolv1.NodePool, obj Object) bool {
	if obj.GetNamespace() != pool.Namespace {
		return false
	}
	if _, isCluster := obj.(*clusterv1.Cluster); isCluster {
		return pool.Spec.ClusterName == obj.GetName()
	}
	if u, isU := obj.(*unstructured.Unstructured); isU {
		ref := pool.Spec.InfrastructureTemplateRef
		gvk := u.GroupVersionKind()
		return ref.APIGroup == gvk.Group && ref.Kind == gvk.Kind && ref.Name == u.GetName()
	}
	if _, isSecret := obj.(*corev1.Secret); isSecret {
		return pool.Spec.PullSecretRef != nil && pool.Spec.PullSecretRef.Name == obj.GetName()
	}
	if _, isCM := obj.(*corev1.ConfigMap); !isCM {
		return false
	}
	if pool.Spec.AdditionalTrustBundleRef != nil && pool.Spec.AdditionalTrustBundleRef.Name == obj.GetName() {
		return true
	}
	for _, c := range pool.Spec.Config {
		if c.Name == obj.GetName() {
			return true
		}
	}
	return false
}
