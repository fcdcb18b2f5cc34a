package stack

import (
	"context"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// WorkersPool is the NodePool "workers" of n machines of cluster c1, with
// the user config chrony and the machine template small: what
// CreateWorkersPool creates.
func WorkersPool(ns string, n int32) *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName:               "c1",
			Replicas:                  ptr.To(n),
			Release:                   nodepoolv1.Release{Version: "v1.36.3"},
			Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
			InfrastructureTemplateRef: TemplateRef("small"),
		},
	}
}

// CreateWorkersPool creates in namespace ns the Cluster c1 with its (sim)
// control plane, the machine template small with spec template, the user
// config chrony (server time1.corp.example) and WorkersPool(ns, n).
func CreateWorkersPool(ctx context.Context, c client.Client, ns string, n int32, template simv1.SimMachineSpec) (*nodepoolv1.NodePool, error) {
	if err := CreateCluster(ctx, c, ns, "c1"); err != nil {
		return nil, err
	}
	if err := simtest.CreateMachineTemplate(ctx, c, ns, "small", template); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, ConfigMap(ns, "chrony", Chrony("time1.corp.example"))); err != nil {
		return nil, err
	}
	p := WorkersPool(ns, n)
	return p, c.Create(ctx, p)
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
