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

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// manifests are the edited objects given to `plan -f`.
type manifests struct {
	pools   []*nodepoolv1.NodePool
	objects []client.Object // ConfigMaps and Secrets
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
		return nil, fmt.Errorf("no NodePool, ConfigMap or Secret in %s", strings.Join(files, ", "))
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
	case gvk.Kind == "":
		return fmt.Errorf("%s has no kind: give apiVersion and kind", where)
	default:
		return fmt.Errorf("%s is a %s (%s): plan takes NodePools (%s), ConfigMaps and Secrets", where, gvk.Kind, gvk.GroupVersion(), nodepoolv1.GroupVersion)
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
