package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/settings"
)

// Which token Secrets are the controller's (secrets/token_binding.go): it
// binds every token Secret it writes with a key only it holds, the Secret
// secrets.TokenKeyName in its namespace (made at its first start; every
// shard reads the same one). At each reconcile, a token Secret of the pool
// whose binding does not verify is:
//
//   - bound in place when it was created before the key (written by a
//     release before bindings, or before the key was made again): the API
//     server sets creationTimestamp, so nothing made after the key passes
//     for older;
//   - otherwise refused: a PayloadRefused event and
//     nodepool_payload_refused_total{reason="unbound_token"} once per
//     version; it is never given to the engine, mirrored or protected with
//     the in-use finalizer, and it is deleted (with a precondition on what
//     was read), so a payload server reading the pools' own Secrets (the
//     layout before mirrors) stops serving it too. A token the controller
//     needs under its name is then created by the controller.

// tokenKey is the binding key as read from the API server.
type tokenKey struct {
	mu      sync.Mutex
	key     []byte
	created time.Time
	read    time.Time
}

// keyRereadInterval is how often at most a binding that does not verify
// makes the controller read the key again (one copied from the source
// of a clusterctl move replaces the one it made).
const keyRereadInterval = 10 * time.Second

// bindingKey returns the binding key and when its Secret was created,
// reading it (uncached: the cache strips the data of Secrets that are not
// a pool's) or making it the first time; reread reads it again unless it
// was read in the last keyRereadInterval.
func (r *Reconciler) bindingKey(ctx context.Context, reread bool) ([]byte, time.Time, error) {
	r.tokenKey.mu.Lock()
	defer r.tokenKey.mu.Unlock()
	if r.tokenKey.key != nil && (!reread || time.Since(r.tokenKey.read) < keyRereadInterval) {
		return r.tokenKey.key, r.tokenKey.created, nil
	}
	ns := r.Settings.PublishNamespace
	if ns == "" {
		ns = settings.DefaultNamespace
	}
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: secrets.TokenKeyName}, s)
	if apierrors.IsNotFound(err) {
		s, err = secrets.NewTokenKey(ns)
		if err != nil {
			return nil, time.Time{}, err
		}
		if err = r.Client.Create(ctx, s); apierrors.IsAlreadyExists(err) {
			// Another shard made it first.
			s = &corev1.Secret{}
			err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: secrets.TokenKeyName}, s)
		}
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading the token binding key %s/%s: %w", ns, secrets.TokenKeyName, err)
	}
	key, err := secrets.TokenKeyOf(s)
	if err != nil {
		return nil, time.Time{}, err
	}
	r.tokenKey.key, r.tokenKey.created, r.tokenKey.read = key, s.CreationTimestamp.Time, time.Now()
	return key, r.tokenKey.created, nil
}

// trustTokens keeps in w and in only the token Secrets the controller
// wrote (bound by its key), binds those made before the key, and refuses
// and deletes the others.
func (r *Reconciler) trustTokens(ctx context.Context, pool *nodepoolv1.NodePool, w *world, in *rollout.Input) error {
	if len(w.Tokens) == 0 {
		return nil
	}
	key, created, err := r.bindingKey(ctx, false)
	if err != nil {
		return err
	}
	var refused []observe.Refusal
	for name, s := range w.Tokens {
		if secrets.TokenBound(s, key) {
			continue
		}
		if key, created, err = r.bindingKey(ctx, true); err != nil {
			return err
		}
		if secrets.TokenBound(s, key) {
			continue
		}
		if s.CreationTimestamp.Time.Before(created) {
			bound := s.DeepCopy()
			secrets.BindToken(bound, key)
			if err := r.Client.Patch(ctx, bound, client.MergeFromWithOptions(s, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("binding token Secret %s, made before the binding key: %w", name, err)
			}
			w.Tokens[name] = bound
			continue
		}
		refused = append(refused, observe.Refusal{Secret: s, Reason: secrets.RefusedUnboundToken, Err: secrets.UnboundTokenError(s)})
		delete(w.Tokens, name)
		delete(w.DecodedTokens, name)
		delete(in.Tokens, name)
		if err := r.deleteRefused(ctx, s); err != nil {
			r.log(pool).Info("a refused token Secret is not deleted yet", "secret", name, "reason", err.Error())
		}
	}
	r.reportRefusals(pool, refused)
	return nil
}

// deleteRefused deletes a refused Secret as it was read: a precondition on
// its UID and resourceVersion, so a Secret written since is not deleted
// on an old verdict. The in-use finalizer, if it was copied onto it, is
// removed first.
func (r *Reconciler) deleteRefused(ctx context.Context, s *corev1.Secret) error {
	if !s.DeletionTimestamp.IsZero() {
		return nil
	}
	rv := s.ResourceVersion
	if controllerutil.ContainsFinalizer(s, nodepoolv1.FinalizerInUse) {
		patched := s.DeepCopy()
		controllerutil.RemoveFinalizer(patched, nodepoolv1.FinalizerInUse)
		if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(s, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
		rv = patched.ResourceVersion
	}
	err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// checkOwnToken says whether the token Secret of name, which exists and is
// controlled by the pool but is not in this reconcile's cached read, is
// the controller's (bound by its key): one made by someone else is never
// adopted, it is a name conflict until it is gone.
func (r *Reconciler) checkOwnToken(ctx context.Context, pool *nodepoolv1.NodePool, name string) error {
	got := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, got); err != nil {
		return fmt.Errorf("reading the existing token Secret %s: %w", name, err)
	}
	key, _, err := r.bindingKey(ctx, true)
	if err != nil {
		return err
	}
	if !secrets.TokenBound(got, key) {
		return &conflictError{objects: []string{"Secret " + name + " (a token Secret the controller did not write)"}}
	}
	return fmt.Errorf("token Secret %s %w", name, errNotCached)
}
