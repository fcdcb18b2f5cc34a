package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// overlay reads through a live reader, except for the objects it holds
// (edited manifests: ConfigMaps, Secrets, the Cluster, infrastructure
// templates): those it returns as edited. It is how `plan` gathers a
// pool's inputs as they would be after an apply.
type overlay struct {
	client.Reader
	scheme *runtime.Scheme
	objs   map[overlayKey]map[string]any
}

type overlayKey struct {
	gk  schema.GroupKind
	key types.NamespacedName
}

func newOverlay(live client.Client) *overlay {
	return &overlay{Reader: live, scheme: live.Scheme(), objs: map[overlayKey]map[string]any{}}
}

// Get returns the edited object at key, if any, else reads live.
func (o *overlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, o.scheme)
	if err == nil {
		if edited, ok := o.objs[overlayKey{gvk.GroupKind(), key}]; ok {
			if u, isU := obj.(*unstructured.Unstructured); isU {
				u.Object = runtime.DeepCopyJSON(edited)
				return nil
			}
			return runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(edited), obj)
		}
	}
	return o.Reader.Get(ctx, key, obj, opts...)
}

// add lays an edited object over the live one.
func (o *overlay) add(obj client.Object) error {
	if s, ok := obj.(*corev1.Secret); ok {
		s = s.DeepCopy()
		// kubectl apply turns stringData into data: so does the plan.
		if len(s.StringData) > 0 && s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, val := range s.StringData {
			s.Data[k] = []byte(val)
		}
		s.StringData = nil
		obj = s
	}
	gvk, err := apiutil.GVKForObject(obj, o.scheme)
	if err != nil {
		return fmt.Errorf("%T cannot be laid over the cluster: %w", obj, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	o.objs[overlayKey{gvk.GroupKind(), client.ObjectKeyFromObject(obj)}] = u
	return nil
}
