package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// overlay reads through a live reader, except for the ConfigMaps and
// Secrets it holds (edited manifests): those it returns as edited. It is
// how `plan` gathers a pool's inputs as they would be after an apply.
type overlay struct {
	client.Reader
	configMaps map[types.NamespacedName]*corev1.ConfigMap
	secrets    map[types.NamespacedName]*corev1.Secret
}

func newOverlay(live client.Reader) *overlay {
	return &overlay{Reader: live, configMaps: map[types.NamespacedName]*corev1.ConfigMap{}, secrets: map[types.NamespacedName]*corev1.Secret{}}
}

// Get returns the edited ConfigMap or Secret at key, if any, else reads live.
func (o *overlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch out := obj.(type) {
	case *corev1.ConfigMap:
		if cm, ok := o.configMaps[key]; ok {
			cm.DeepCopyInto(out)
			return nil
		}
	case *corev1.Secret:
		if s, ok := o.secrets[key]; ok {
			s.DeepCopyInto(out)
			return nil
		}
	}
	return o.Reader.Get(ctx, key, obj, opts...)
}

// add lays an edited object over the live one.
func (o *overlay) add(obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		o.configMaps[key] = v
	case *corev1.Secret:
		s := v.DeepCopy()
		// kubectl apply turns stringData into data: so does the plan.
		if len(s.StringData) > 0 && s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, val := range s.StringData {
			s.Data[k] = []byte(val)
		}
		s.StringData = nil
		o.secrets[key] = s
	default:
		return fmt.Errorf("%T cannot be laid over the cluster: only ConfigMaps and Secrets", obj)
	}
	return nil
}
