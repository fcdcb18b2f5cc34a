package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// manifests are the edited objects given to `plan -f`.
type manifests struct {
	pools []*nodepoolv1.NodePool
	// objects are ConfigMaps, Secrets, Clusters and infrastructure
	// machine templates (unstructured).
	objects []client.Object
}

// readManifests reads YAML or JSON manifests (several documents per file,
// and v1 Lists) from files, "-" being standard input. Objects without a
// namespace get namespace.
func readManifests(files []string, stdin io.Reader, namespace string) (*manifests, error) {
	m := &manifests{}
	for _, f := range files {
		var r io.Reader
		if f == "-" {
			r = stdin
		} else {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("reading -f %s: %w", f, err)
			}
			r = bytes.NewReader(b)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
		for doc := 1; ; doc++ {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("-f %s, document %d: %w", f, doc, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := m.add(u, namespace, fmt.Sprintf("-f %s, document %d", f, doc)); err != nil {
				return nil, err
			}
		}
	}
	if len(m.pools) == 0 && len(m.objects) == 0 {
		return nil, fmt.Errorf("no NodePool, ConfigMap, Secret, Cluster or infrastructure machine template in %s", strings.Join(files, ", "))
	}
	return m, nil
}

func (m *manifests) add(u *unstructured.Unstructured, namespace, where string) error {
	if u.IsList() {
		return u.EachListItem(func(o runtime.Object) error {
			return m.add(o.(*unstructured.Unstructured), namespace, where)
		})
	}
	gvk := u.GroupVersionKind()
	var obj client.Object
	switch {
	case gvk == nodepoolv1.GroupVersion.WithKind("NodePool"):
		obj = &nodepoolv1.NodePool{}
	case gvk == corev1.SchemeGroupVersion.WithKind("ConfigMap"):
		obj = &corev1.ConfigMap{}
	case gvk == corev1.SchemeGroupVersion.WithKind("Secret"):
		obj = &corev1.Secret{}
	case gvk == clusterv1.GroupVersion.WithKind("Cluster"):
		obj = &clusterv1.Cluster{}
	case gvk.Group != clusterv1.GroupVersion.Group && strings.HasSuffix(gvk.Kind, "MachineTemplate"):
		// An infrastructure provider's template: read as the provider
		// serves it, so it is kept as it is.
		if u.GetName() == "" {
			return fmt.Errorf("%s, %s: metadata.name is empty", where, gvk.Kind)
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		m.objects = append(m.objects, u)
		return nil
	case gvk.Kind == "":
		return fmt.Errorf("%s has no kind: give apiVersion and kind", where)
	default:
		return fmt.Errorf("%s is a %s (%s): plan takes NodePools (%s), ConfigMaps, Secrets, Clusters (%s) and infrastructure machine templates (kind *MachineTemplate)",
			where, gvk.Kind, gvk.GroupVersion(), nodepoolv1.GroupVersion, clusterv1.GroupVersion)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return fmt.Errorf("%s, %s %s: %w", where, gvk.Kind, u.GetName(), err)
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s, %s: metadata.name is empty", where, gvk.Kind)
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	if p, ok := obj.(*nodepoolv1.NodePool); ok {
		m.pools = append(m.pools, p)
		return nil
	}
	m.objects = append(m.objects, obj)
	return nil
}
