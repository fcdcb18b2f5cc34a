package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/secrets"
)

// conflictError says objects of names the pool uses exist and are not the
// pool's: the controller leaves them untouched and reports them.
type conflictError struct {
	objects []string // "Kind name"
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("%s already exist and are not owned by this NodePool: nodepool leaves them untouched and acts on nothing that would need them; rename the NodePool, or delete or rename the objects if they are unused",
		strings.Join(e.objects, ", "))
}

// isConflict reports whether err is (or wraps) a name conflict.
func isConflict(err error) bool {
	var c *conflictError
	return errors.As(err, &c)
}

// errNotCached says an object of the pool's exists that this reconcile's
// cached read did not show: the next reconcile sees it.
var errNotCached = errors.New("exists but is not in the cache yet; retrying")

// createOwned creates obj, controlled by pool. If an object of its name
// exists already and the pool controls it (a cache that has not seen the
// pool's own write yet), the error wraps errNotCached; anything else is a
// conflict, and the object is never adopted or changed.
func (r *Reconciler) createOwned(ctx context.Context, pool *nodepoolv1.NodePool, obj client.Object, kind string) error {
	if err := controllerutil.SetControllerReference(pool, obj, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, obj)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
		}
		return nil
	}
	existing, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
	}
	if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), existing); gerr != nil {
		return fmt.Errorf("reading the existing %s %s: %w", kind, obj.GetName(), gerr)
	}
	if !metav1.IsControlledBy(existing, pool) {
		return &conflictError{objects: []string{kind + " " + obj.GetName()}}
	}
	return fmt.Errorf("%s %s %w", kind, obj.GetName(), errNotCached)
}

// protectInUse puts the in-use finalizer on the pool's own user-data, token
// and payload Secrets that lack it (made by an earlier version), so a
// kubectl delete of one that machines still boot from waits for the
// controller to find it unreferenced. Only on Secrets of the names the
// controller gives (namedByController): one that merely copies the pool's
// labels and controller reference is never protected, so its maker can
// delete it.
func (r *Reconciler) protectInUse(ctx context.Context, pool *nodepoolv1.NodePool, w *world) error {
	for kind, group := range map[string]map[string]*corev1.Secret{secrets.KindUserData: w.UserData, secrets.KindToken: w.Tokens, secrets.KindPayload: w.Payloads} {
		for key, s := range group {
			if !s.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(s, nodepoolv1.FinalizerInUse) || !namedByController(pool, w, kind, s) {
				continue
			}
			patched := s.DeepCopy()
			controllerutil.AddFinalizer(patched, nodepoolv1.FinalizerInUse)
			if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(s, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("protecting Secret %s while in use: %w", s.Name, err)
			}
			// Later writes of this reconcile lock on the new version.
			group[key] = patched
		}
	}
	return nil
}

// deleteSecret removes the in-use finalizer from one of the pool's Secrets
// and deletes it.
func (r *Reconciler) deleteSecret(ctx context.Context, s *corev1.Secret) error {
	if controllerutil.ContainsFinalizer(s, nodepoolv1.FinalizerInUse) {
		patched := s.DeepCopy()
		controllerutil.RemoveFinalizer(patched, nodepoolv1.FinalizerInUse)
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(s)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing Secret %s: %w", s.Name, err)
		}
	}
	if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Secret %s: %w", s.Name, err)
	}
	return nil
}

// deletedInUse names the pool's Secrets someone deleted that the in-use
// finalizer keeps.
func deletedInUse(w *world) []string {
	var out []string
	for _, group := range []map[string]*corev1.Secret{w.UserData, w.Tokens, w.Payloads} {
		for _, s := range group {
			if !s.DeletionTimestamp.IsZero() {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// cached is the pool's object of key as the reconcile read it (nil when
// it read none): a Secret, its MachineDeployment or InPlace MachineSet.
func (w *world) cached(key ownedKey) client.Object {
	switch key.kind {
	case "Secret":
		if s := w.secretByName(key.name); s != nil {
			return s
		}
	case "MachineDeployment":
		if md := w.MachineDeployment; md != nil && md.Name == key.name {
			return md
		}
	case "MachineSet":
		if ms := w.InPlaceSet; ms != nil && ms.Name == key.name {
			return ms
		}
	}
	return nil
}

// secretByName finds one of the pool's Secrets the world holds.
func (w *world) secretByName(name string) *corev1.Secret {
	if s, ok := w.UserData[name]; ok {
		return s
	}
	if s, ok := w.Tokens[name]; ok {
		return s
	}
	if s, ok := w.Unreadable[name]; ok {
		return s
	}
	for _, s := range w.Payloads {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ownedBy reports whether o has an owner reference to the pool, controller
// or not (template clones made by earlier versions carry a plain one).
func ownedBy(o metav1.Object, pool *nodepoolv1.NodePool) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == pool.UID {
			return true
		}
	}
	return false
}
