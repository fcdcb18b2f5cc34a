package secrets

import (
	"bytes"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/userdata"
)

// The update Secret of an InPlace pool lives in the workload cluster: the
// Ignition pointer config (the payload server's URL, CA and the pool's
// bearer token) from which the pool's node agents fetch their update. A
// Node names it in annotation nodepoolv1.AnnotationUpdateSecret.

// UpdateSecretKey is the key of the update Secret holding the pointer
// config, as in Cluster API bootstrap data Secrets.
const UpdateSecretKey = "value"

// UpdateSecretName names a pool's update Secret: unique per management
// namespace and pool, since several clusters may share an API server in
// tests.
func UpdateSecretName(pool *nodepoolv1.NodePool) string {
	return "nodepool-update." + pool.Namespace + "." + pool.Name
}

// UpdateSecretRef is the value of a Node's AnnotationUpdateSecret naming a
// pool's update Secret in namespace of the workload cluster.
func UpdateSecretRef(namespace string, pool *nodepoolv1.NodePool) string {
	return namespace + "/" + UpdateSecretName(pool)
}

// ParseUpdateSecretRef reads a Node's AnnotationUpdateSecret.
func ParseUpdateSecretRef(ref string) (types.NamespacedName, error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("annotation %s=%q does not name the update Secret as <namespace>/<name>", nodepoolv1.AnnotationUpdateSecret, ref)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// NewUpdateSecret is a pool's update Secret in namespace, holding pointer.
func NewUpdateSecret(namespace string, pool *nodepoolv1.NodePool, pointer []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: UpdateSecretName(pool), Labels: map[string]string{
			nodepoolv1.LabelPool: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{UpdateSecretKey: pointer},
	}
}

// HoldsPointer reports whether update Secret s holds exactly pointer.
func HoldsPointer(s *corev1.Secret, pointer []byte) bool {
	return bytes.Equal(s.Data[UpdateSecretKey], pointer)
}

// SetPointer makes update Secret s hold pointer alone.
func SetPointer(s *corev1.Secret, pointer []byte) {
	s.Data = map[string][]byte{UpdateSecretKey: pointer}
}

// DecodeUpdateSecret reads the pointer config of an update Secret; the
// error says what is wrong with it (ref names it).
func DecodeUpdateSecret(ref string, s *corev1.Secret) (*userdata.Pointer, error) {
	raw, ok := s.Data[UpdateSecretKey]
	if !ok {
		return nil, fmt.Errorf("update Secret %s has no key %q holding the pointer config", ref, UpdateSecretKey)
	}
	pointer, err := userdata.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("update Secret %s: %v", ref, err)
	}
	return pointer, nil
}
