package stack

import (
	"context"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// CreateCluster creates a Cluster API Cluster with its (sim) control plane
// in namespace ns.
func CreateCluster(ctx context.Context, c client.Client, ns, name string) error {
	_, err := simtest.CreateCluster(ctx, c, ns, name)
	return err
}

// CreateTemplate creates a SimMachineTemplate in namespace ns.
func CreateTemplate(ctx context.Context, c client.Client, ns, name string) error {
	return simtest.CreateMachineTemplate(ctx, c, ns, name, simv1.SimMachineSpec{})
}

// TemplateRef references a SimMachineTemplate from a NodePool.
func TemplateRef(name string) nodepoolv1.TemplateReference {
	return nodepoolv1.TemplateReference{APIGroup: simv1.GroupVersion.Group, Kind: simv1.KindSimMachineTemplate, Name: name}
}

// Chrony is a user config: an Ignition fragment writing /etc/chrony.conf
// with server.
func Chrony(server string) string {
	return fmt.Sprintf(`ignition: {version: 3.4.0}
storage:
  files:
    - path: /etc/chrony.conf
      mode: 0644
      contents: {source: "data:,server%%20%s%%20iburst%%0A"}
`, server)
}

// ConfigMap is a user config ConfigMap (key "config"), with its type set
// so it can be written as a manifest too.
func ConfigMap(ns, name, config string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string]string{inputs.ConfigKey: config},
	}
}

// PullSecret is a pull Secret for registry.example with auth
// ("user:password"), with its type set so it can be written as a manifest.
func PullSecret(ns, name, auth string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(
			`{"auths":{"registry.example":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(auth)) + `"}}}`)},
	}
}
