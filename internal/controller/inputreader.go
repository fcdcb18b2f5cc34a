package controller

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/gather"
)

// inputReader is how the controller reads a pool's inputs (inputs.Gather)
// without an API request per read: ConfigMaps and Secrets are known by
// their metadata, from the cache; their content is read from the API
// server only when their resourceVersion is one the content cache does not
// hold, and then once for every pool that references them. Everything
// else (the Cluster, the template's CRD and the template) comes from the
// cache.
type inputReader struct {
	// cached reads through the manager's cache (the client: typed and
	// metadata-only objects; the cache itself: unstructured ones).
	cached, unstructured client.Reader
	// api reads uncached: the content of ConfigMaps and Secrets.
	api     client.Reader
	content *lru[client.ObjectKey, client.Object]
	// pins names, per template generation, the clone whose recorded
	// spec is pinned (PinnedTemplateSpec).
	pins *lru[pinKey, string]
}

// pinKey is a template's generation.
type pinKey struct {
	namespace  string
	uid        types.UID
	generation int64
}

var (
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	secretGVK    = corev1.SchemeGroupVersion.WithKind("Secret")
)

func newInputReader(cached, unstructured, api client.Reader, size int) *inputReader {
	return &inputReader{cached: cached, unstructured: unstructured, api: api, content: newLRU[client.ObjectKey, client.Object](size),
		pins: newLRU[pinKey, string](size)}
}

// PinnedTemplateSpec is inputs.PinnedSpec of the template's clones
// (gather.TemplatePins) without a list of them at each read: the clone
// found pinned the first time is remembered, and while the cache holds it
// as a clone of the template's generation whose record counts
// (inputs.RecordedSpec), its record is the pinned spec. Only when it is
// gone (cleaned up, being deleted) are the clones listed again. A clone
// made later is younger, and every clone of a generation records the spec
// the older ones recorded, so the oldest clone's record stays the one a
// list would give.
func (r *inputReader) PinnedTemplateSpec(ctx context.Context, tmpl *unstructured.Unstructured, clones func() ([]unstructured.Unstructured, error)) ([]byte, error) {
	key := pinKey{namespace: tmpl.GetNamespace(), uid: tmpl.GetUID(), generation: tmpl.GetGeneration()}
	if name, ok := r.pins.get(key); ok {
		c := &unstructured.Unstructured{}
		c.SetGroupVersionKind(tmpl.GroupVersionKind())
		err := r.unstructured.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: name}, c, client.UnsafeDisableDeepCopy)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			labels := c.GetLabels()
			if labels[nodepoolv1.LabelTemplateSourceUID] == string(key.uid) && labels[nodepoolv1.LabelTemplateSourceGeneration] == strconv.FormatInt(key.generation, 10) {
				if spec, ok := inputs.RecordedSpec(c); ok {
					return spec, nil
				}
			}
		}
		r.pins.remove(key)
	}
	list, err := clones()
	if err != nil {
		return nil, err
	}
	name, spec := inputs.PinnedClone(list)
	if name != "" {
		r.pins.put(key, name)
	}
	return spec, nil
}

// Get reads obj; a ConfigMap or Secret comes with its content.
func (r *inputReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		rv, err := r.version(ctx, kindOf(obj), key)
		if err != nil {
			return err
		}
		return r.withContent(ctx, key, rv, o)
	case *unstructured.Unstructured:
		return r.unstructured.Get(ctx, key, o, opts...)
	default:
		return r.cached.Get(ctx, key, obj, opts...)
	}
}

// List reads through the cache (inputs.Gather lists the template's clones).
func (r *inputReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		return r.unstructured.List(ctx, list, opts...)
	}
	return r.cached.List(ctx, list, opts...)
}

// version is the resourceVersion the cache holds of an object, as the
// object's watch last reported it (read from the cached object itself,
// not a copy).
func (r *inputReader) version(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (string, error) {
	switch gvk {
	case configMapGVK:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		if err := r.cached.Get(ctx, key, m, client.UnsafeDisableDeepCopy); err != nil {
			return "", err
		}
		return m.ResourceVersion, nil
	case secretGVK:
		s := &corev1.Secret{} // the cache holds other Secrets without data
		if err := r.cached.Get(ctx, key, s, client.UnsafeDisableDeepCopy); err != nil {
			return "", err
		}
		return s.ResourceVersion, nil
	}
	return "", fmt.Errorf("no version of %s from the cache", gvk)
}

// withContent fills obj (a ConfigMap or Secret) with the object at
// resourceVersion rv or later, reading the API server only when the
// content cache holds an older one.
func (r *inputReader) withContent(ctx context.Context, key client.ObjectKey, rv string, obj client.Object) error {
	ckey := client.ObjectKey{Namespace: key.Namespace, Name: kindOf(obj).Kind + "/" + key.Name}
	if c, ok := r.content.get(ckey); ok && c.GetResourceVersion() == rv {
		copyInto(c, obj)
		return nil
	}
	if err := r.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.content.remove(ckey)
		}
		return err
	}
	obj.SetManagedFields(nil)
	r.content.put(ckey, obj.DeepCopyObject().(client.Object))
	return nil
}

func copyInto(from, to client.Object) {
	switch f := from.(type) {
	case *corev1.ConfigMap:
		f.DeepCopyInto(to.(*corev1.ConfigMap))
	case *corev1.Secret:
		f.DeepCopyInto(to.(*corev1.Secret))
	}
}

func kindOf(obj client.Object) schema.GroupVersionKind {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return configMapGVK
	case *corev1.Secret:
		return secretGVK
	default:
		return o.GetObjectKind().GroupVersionKind()
	}
}

// read is one object a pool's inputs were read from, at its version.
type read struct {
	gvk schema.GroupVersionKind
	// typ is the Go type it was read as.
	typ reflect.Type
	key client.ObjectKey
	// version is its resourceVersion, "" when it was not found.
	version string
}

// A render's gather reads the pinned template spec through the recorder.
var _ gather.TemplatePins = (*recorder)(nil)

// recorder reads through the input reader and records what it Gets (its
// lists and PinnedTemplateSpec are the input reader's).
type recorder struct {
	*inputReader
	reads []read
}

func (r *recorder) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.inputReader.Get(ctx, key, obj, opts...)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	rd := read{gvk: kindOf(obj), typ: reflect.TypeOf(obj), key: key}
	if err == nil {
		rd.version = versionOf(obj)
	}
	r.reads = append(r.reads, rd)
	return err
}

// versionOf is what changes when an object's part that inputs.Gather reads
// does: the generation of an object with a spec (the Cluster, the template:
// Gather reads their spec only, and the Cluster's status changes with every
// machine of the cluster), the resourceVersion of others (ConfigMaps,
// Secrets, the CRD whose labels Gather reads).
func versionOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret, *metav1.PartialObjectMetadata:
	default:
		if g := obj.GetGeneration(); g > 0 {
			return "generation " + strconv.FormatInt(g, 10)
		}
	}
	return obj.GetResourceVersion()
}

// empty is a new object of the type and kind rd was read as.
func (rd read) empty() client.Object {
	obj := reflect.New(rd.typ.Elem()).Interface().(client.Object)
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.SetGroupVersionKind(rd.gvk)
	case *metav1.PartialObjectMetadata:
		o.SetGroupVersionKind(rd.gvk)
	}
	return obj
}

// current is the version the cache holds now of what rd read ("" when it
// is gone); it never reads the API server. It reads the cached objects
// themselves, not copies: only their version is read.
func (r *inputReader) current(ctx context.Context, rd read) (string, error) {
	var err error
	var v string
	switch obj := rd.empty(); obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		v, err = r.version(ctx, rd.gvk, rd.key)
	default:
		if u, ok := obj.(*unstructured.Unstructured); ok {
			err = r.unstructured.Get(ctx, rd.key, u, client.UnsafeDisableDeepCopy)
		} else {
			err = r.cached.Get(ctx, rd.key, obj, client.UnsafeDisableDeepCopy)
		}
		v = versionOf(obj)
	}
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	return v, err
}
