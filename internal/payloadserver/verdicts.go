package payloadserver

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"nodepool.dev/nodepool/internal/secrets"
)

// maxVerdictsPerSecret bounds the versions of one Secret whose verdict is
// kept: the informer delivers them in order, so only the last few can still
// be pending.
const maxVerdictsPerSecret = 4

// verdictKey identifies one version of one Secret: the API server gives a
// Secret a new resource version whenever anything in it changes, and a new
// UID when it is created again.
type verdictKey struct {
	uid types.UID
	rv  string
}

type verdict struct {
	key verdictKey
	err error // nil: the content is verified
}

// verdicts remembers the outcome of the content check of payload Secrets
// that the informer's transform verified and then stripped of their
// fragments and manifest (which only the check reads), so the cache does
// not hold them.
type verdicts struct {
	mu     sync.Mutex
	byName map[types.NamespacedName][]verdict
}

func (v *verdicts) put(name types.NamespacedName, key verdictKey, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byName == nil {
		v.byName = map[types.NamespacedName][]verdict{}
	}
	list := append(v.byName[name], verdict{key: key, err: err})
	if len(list) > maxVerdictsPerSecret {
		list = list[len(list)-maxVerdictsPerSecret:]
	}
	v.byName[name] = list
}

func (v *verdicts) get(name types.NamespacedName, key verdictKey) (error, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, vd := range v.byName[name] {
		if vd.key == key {
			return vd.err, true
		}
	}
	return nil, false
}

// forget drops the verdicts of name's incarnation uid ("": all of them).
// The transform may already have checked a Secret created again under the
// same name (another UID) when the deletion of the old one is handled.
func (v *verdicts) forget(name types.NamespacedName, uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if uid == "" {
		delete(v.byName, name)
		return
	}
	var keep []verdict
	for _, vd := range v.byName[name] {
		if vd.key.uid != uid {
			keep = append(keep, vd)
		}
	}
	if len(keep) == 0 {
		delete(v.byName, name)
		return
	}
	v.byName[name] = keep
}

// Transform is the informer's transform for an index: TransformSecret, and
// for a payload Secret the content check and the index's budgets (admit),
// after which the cache keeps only its Ignition config, and only if the
// index admits it (nothing at all otherwise). Upsert of the transformed
// object uses the recorded outcome. Without a UID and resource version
// (not from the API server) a Secret is left whole.
func (ix *Index) Transform(obj any) (any, error) {
	obj, err := TransformSecret(obj)
	s, ok := obj.(*corev1.Secret)
	if err != nil || !ok || secrets.ServedKind(s) != secrets.KindPayload || s.UID == "" || s.ResourceVersion == "" {
		return obj, err
	}
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	key := verdictKey{s.UID, s.ResourceVersion}
	// The cache may transform an object more than once: a version already
	// checked (and stripped) keeps its verdict.
	verr, seen := ix.verdicts.get(name, key)
	var pe *payloadEntry
	if !seen {
		pe, verr = verifyPayload(s, ix.limits.MaxPayloadBytes)
		ix.verdicts.put(name, key, verr)
	}
	delete(s.Data, secrets.KeyManifest)
	delete(s.Data, secrets.KeyFragments)
	if verr != nil || !ix.admit(s, key, pe) {
		delete(s.Data, secrets.KeyIgnition)
	}
	return s, nil
}

// decodePayload is verifyPayload, or its recorded outcome for a Secret the
// transform verified.
func (ix *Index) decodePayload(s *corev1.Secret) (*payloadEntry, error) {
	name := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if s.UID != "" && s.ResourceVersion != "" {
		if err, ok := ix.verdicts.get(name, verdictKey{s.UID, s.ResourceVersion}); ok {
			if err != nil {
				return nil, err
			}
			return payloadHeader(s, ix.limits.MaxPayloadBytes)
		}
	}
	return verifyPayload(s, ix.limits.MaxPayloadBytes)
}
