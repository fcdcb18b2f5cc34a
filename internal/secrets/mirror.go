package secrets

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Mirrors: the controller's copies of a pool's token Secrets, and of the
// payload Secrets they point to, in one namespace of its own (its
// --mirror-namespace), so the network-facing payload server reads Secrets
// in that namespace only. A mirror carries what the payload server reads
// of its source (ServedKeys) and, since owner references do not cross
// namespaces, names its pool by labels and the pool's UID by annotation.
// Those prove something there that they prove nothing of in a pool's
// namespace: only the controller (and cluster admins) may write Secrets in
// the controller's namespace. The content checks (a payload's hash, its
// name) hold on a mirror as on its source.
//
// A mirror's kind label is not a source's (KindTokenMirror, not
// KindToken) and it has no LabelPool: a payload server or controller of
// an earlier version, which selects Secrets by those labels, never sees
// one, so both layouts can run side by side during an upgrade (two token
// Secrets holding one token would serve neither).
const (
	// KindTokenMirror and KindPayloadMirror are the LabelKind values of
	// mirrors.
	KindTokenMirror   = "token-mirror"
	KindPayloadMirror = "payload-mirror"
	// LabelMirrorNamespace and LabelMirrorPool on a mirror name its pool:
	// the NodePool's namespace and name.
	LabelMirrorNamespace = "nodepool.dev/mirror-of-namespace"
	LabelMirrorPool      = "nodepool.dev/mirror-of-pool"
	// AnnotationMirrorPoolUID on a mirror is the UID of the NodePool that
	// controls its source: what an owner reference says of a source.
	AnnotationMirrorPoolUID = "nodepool.dev/mirror-of-uid"
)

// The marker the controller writes into its mirror namespace once it has
// mirrored every pool after it started: a payload server reading mirrors
// becomes ready only once it exists, so during an upgrade from the
// pools' own Secrets the replicas reading those serve until the mirrors
// are complete.
const (
	// MirrorsReadyName is the marker Secret's name.
	MirrorsReadyName = "nodepool-mirrors-ready"
	// KindMirrorsReady is its LabelKind.
	KindMirrorsReady = "mirrors-ready"
	// AnnotationMirrorsReadyAt is when the controller finished mirroring
	// (RFC 3339).
	AnnotationMirrorsReadyAt = "nodepool.dev/mirrors-ready-at"
)

// NewMirrorsReady is the marker Secret in namespace, written at at.
func NewMirrorsReady(namespace string, at time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: MirrorsReadyName,
			Labels:      map[string]string{LabelKind: KindMirrorsReady},
			Annotations: map[string]string{AnnotationMirrorsReadyAt: FormatTime(at)},
		},
		Type: corev1.SecretTypeOpaque,
	}
}

// mirrorKinds maps a source's kind to its mirror's, and back.
var mirrorKinds = map[string]string{KindToken: KindTokenMirror, KindPayload: KindPayloadMirror}

// MirrorName is the name of the mirror of Secret name of namespace:
// "<namespace>.<name>". A namespace has no dot, so the name tells both.
func MirrorName(namespace, name string) string { return namespace + "." + name }

// IsMirror says whether s is a mirror (by its kind label).
func IsMirror(s *corev1.Secret) bool {
	k := KindOf(s)
	return k == KindTokenMirror || k == KindPayloadMirror
}

// ServedKind is the kind of what s holds: KindToken or KindPayload for a
// source or its mirror alike, KindOf(s) otherwise.
func ServedKind(s *corev1.Secret) string {
	k := KindOf(s)
	for src, mirror := range mirrorKinds {
		if k == mirror {
			return src
		}
	}
	return k
}

// MirrorSelector matches every mirror and the marker, for the payload
// server's cache.
func MirrorSelector() labels.Selector {
	req, err := labels.NewRequirement(LabelKind, selection.In, []string{KindTokenMirror, KindPayloadMirror, KindMirrorsReady})
	if err != nil {
		panic(err) // constants: unreachable unless edited into invalid syntax
	}
	return labels.NewSelector().Add(*req)
}

// MirrorsOf matches the mirrors of one pool.
func MirrorsOf(namespace, pool string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelMirrorNamespace: namespace, LabelMirrorPool: pool}).
		Add(must(labels.NewRequirement(LabelKind, selection.In, []string{KindTokenMirror, KindPayloadMirror})))
}

func must(r *labels.Requirement, err error) labels.Requirement {
	if err != nil {
		panic(err)
	}
	return *r
}

// NewMirror is the mirror in namespace of src, a token or payload Secret of
// the pool whose UID is poolUID: what the payload server reads of src
// (ServedKeys, type, hash annotations), and the pool's identity. A
// payload's mirror is immutable, like its source.
func NewMirror(namespace string, src *corev1.Secret, poolUID types.UID) (*corev1.Secret, error) {
	kind, ok := mirrorKinds[KindOf(src)]
	if !ok {
		return nil, fmt.Errorf("Secret %s/%s is neither a token nor a payload Secret: it has no mirror", src.Namespace, src.Name)
	}
	if poolUID == "" {
		return nil, fmt.Errorf("mirroring Secret %s/%s: no pool UID", src.Namespace, src.Name)
	}
	m := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      MirrorName(src.Namespace, src.Name),
			Labels:    map[string]string{LabelKind: kind, LabelMirrorNamespace: src.Namespace, LabelMirrorPool: src.Labels[LabelPool]},
			Annotations: map[string]string{
				AnnotationMirrorPoolUID: string(poolUID),
			},
		},
		Type: src.Type,
		Data: map[string][]byte{},
	}
	for _, k := range []string{AnnotationPayloadHash, AnnotationRolloutHash} {
		if v, ok := src.Annotations[k]; ok {
			m.Annotations[k] = v
		}
	}
	for _, k := range ServedKeys[KindOf(src)] {
		if v, ok := src.Data[k]; ok {
			m.Data[k] = v
		}
	}
	if kind == KindPayloadMirror {
		immutable := true
		m.Immutable = &immutable
	}
	return m, nil
}

// MirrorHolds says whether mirror m already holds what want (NewMirror)
// holds: type, data, labels and the annotations want sets (the payload
// server's first-fetch record on a token mirror is its own). A payload
// mirror's data is compared by its payload hash when m was read without it
// (a cache strips it): payload content is fixed by its hash, and the
// payload server checks it.
func MirrorHolds(m, want *corev1.Secret) bool {
	if m.Type != want.Type || !maps.Equal(m.Labels, want.Labels) {
		return false
	}
	for k, v := range want.Annotations {
		if m.Annotations[k] != v {
			return false
		}
	}
	if KindOf(want) == KindPayloadMirror && Stripped(m) {
		return true
	}
	return maps.EqualFunc(m.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) })
}

// Origin is the pool a token or payload Secret belongs to, as the payload
// server reads it: a pool's own Secret (in its namespace, controlled by
// the NodePool) or the controller's mirror of one.
type Origin struct {
	// Namespace and Pool name the NodePool.
	Namespace, Pool string
	// Name is the name of the pool's own Secret: s's, or its mirror's
	// source's.
	Name string
	// Owner is the NodePool's UID ("" for a source without a controller).
	Owner types.UID
	// Mirror says s is a mirror.
	Mirror bool
}

// OriginOf reads the pool of s. A source's pool is its namespace, its
// LabelPool and its controller (PoolController); a mirror's are its
// labels, its annotation AnnotationMirrorPoolUID, and the source's name
// is its own after "<namespace>.". Errors are RefusedErrors: RefusedInvalid
// for a missing or malformed label, annotation or name, RefusedNotOwned
// for a controller other than the pool.
func OriginOf(s *corev1.Secret) (Origin, error) {
	if !IsMirror(s) {
		pool := s.Labels[LabelPool]
		if err := validatePool(pool); err != nil {
			return Origin{}, refused(s, RefusedInvalid, err)
		}
		owner, err := PoolController(s, pool)
		if err != nil {
			return Origin{}, refused(s, RefusedNotOwned, err)
		}
		return Origin{Namespace: s.Namespace, Pool: pool, Name: s.Name, Owner: owner}, nil
	}
	o := Origin{Namespace: s.Labels[LabelMirrorNamespace], Pool: s.Labels[LabelMirrorPool], Owner: types.UID(s.Annotations[AnnotationMirrorPoolUID]), Mirror: true}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return Origin{}, refused(s, RefusedInvalid, fmt.Errorf("label %s is not a namespace: %s", LabelMirrorNamespace, errs[0]))
	}
	if errs := validation.IsValidLabelValue(o.Pool); o.Pool == "" || len(errs) > 0 {
		return Origin{}, refused(s, RefusedInvalid, fmt.Errorf("label %s is not a pool name", LabelMirrorPool))
	}
	if o.Owner == "" {
		return Origin{}, refused(s, RefusedInvalid, fmt.Errorf("annotation %s (the pool's UID) is not set", AnnotationMirrorPoolUID))
	}
	name, ok := strings.CutPrefix(s.Name, o.Namespace+".")
	if !ok || name == "" {
		return Origin{}, refused(s, RefusedNameMismatch, fmt.Errorf("a mirror of a Secret of namespace %s is named %s.<name>", o.Namespace, o.Namespace))
	}
	o.Name = name
	return o, nil
}

// MirrorKinds lists the LabelKind values of mirrors.
var MirrorKinds = slices.Sorted(maps.Values(mirrorKinds))
