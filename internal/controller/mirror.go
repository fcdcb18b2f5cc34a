package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/secrets"
)

// Mirrors (secrets.NewMirror): with Settings.MirrorNamespace set, each
// reconcile of a pool copies into that namespace, the controller's own,
// its token Secrets and the payload Secrets they point to, so the payload
// server reads Secrets in that one namespace only. The copies are made of
// what the controller trusts as the pool's and nothing else: a token as
// the controller decoded it from a Secret of the name it gives it, a
// payload Secret read whole and verified (content hash, name, the pool as
// its controller). A payload's mirror is written before a token mirror
// points at it, so the payload server never has a token without its
// payload.
//
// Cleanup: owner references do not cross namespaces, so the mirrors of a
// pool are found by their labels. Each reconcile deletes the pool's
// mirrors it no longer wants (a source collected, a token repointed), the
// pool's deletion deletes all of them, and a sweep of the namespace (at
// start and every resync period) deletes those of pools that are gone or
// were made again under the same name (another UID): a mirror outlives
// its pool at most one resync period, even if the pool's finalizer was
// removed by hand.
//
// Upgrade: once every pool of the controller that can be mirrored has
// been mirrored after it started, it writes the marker
// secrets.MirrorsReadyName; a payload server reading mirrors is ready only
// once that exists (docs/operations.md, upgrading). A pool whose reconcile
// is paused (pause.go: the pool's or its Cluster's paused annotation, the
// Cluster's spec.paused, which clusterctl move sets) or that is being
// deleted is not reconciled, so it is not waited for: its mirrors made
// before are kept (the sweep deletes only those of pools that are gone),
// and it is mirrored when its reconcile resumes. A pool whose inputs are
// invalid is still reconciled, and mirrored, with the tokens it has.

// mirrors is what the controller knows of its mirroring.
type mirrors struct {
	// done holds the pools mirrored since the start, by UID. Entries of
	// pools that are gone are pruned at each count (unmirrored), whether
	// or not a deletion reconcile (deleteMirrors) saw them go.
	done sync.Map // types.UID → types.NamespacedName
}

// syncMirrors writes the pool's mirrors from what this reconcile observed
// (w) and applied, and deletes the pool's mirrors it no longer wants.
// deleted names the pool's Secrets this reconcile deleted.
func (r *Reconciler) syncMirrors(ctx context.Context, pool *nodepoolv1.NodePool, w *world, deleted []string) error {
	ns := r.Settings.MirrorNamespace
	if ns == "" || w == nil {
		return nil
	}
	gone := map[string]bool{}
	for _, n := range deleted {
		gone[n] = true
	}
	list := &corev1.SecretList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: secrets.MirrorsOf(pool.Namespace, pool.Name)}); err != nil {
		return fmt.Errorf("listing the pool's mirrors: %w", err)
	}
	existing := map[string]*corev1.Secret{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	keep := map[string]bool{}
	var errs []error

	// Payloads first: a token mirror points only at a mirrored payload.
	mirrored := map[string]bool{} // payload hash → its mirror is right
	for name, t := range w.DecodedTokens {
		if gone[name] || t.RolloutHash == "" || name != secrets.TokenSecretName(pool.Name, t.RolloutHash) || mirrored[t.PayloadHash] {
			continue
		}
		ok, err := r.mirrorPayload(ctx, pool, t.PayloadHash, existing)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			mirrored[t.PayloadHash] = true
			keep[secrets.MirrorName(pool.Namespace, secrets.PayloadSecretName(pool.Name, t.PayloadHash))] = true
		}
	}
	for name, t := range w.DecodedTokens {
		if gone[name] || t.RolloutHash == "" || name != secrets.TokenSecretName(pool.Name, t.RolloutHash) {
			continue
		}
		mname := secrets.MirrorName(pool.Namespace, name)
		keep[mname] = true
		old := existing[mname]
		if !mirrored[t.PayloadHash] {
			// Its payload is not mirrored (yet): the mirror stays as it
			// is, and so does the payload it points to.
			if old != nil {
				if h := string(old.Data[secrets.KeyPayloadHash]); h != "" {
					keep[secrets.MirrorName(pool.Namespace, secrets.PayloadSecretName(pool.Name, h))] = true
				}
			}
			continue
		}
		if err := r.mirrorToken(ctx, pool, w, name, t, old); err != nil {
			errs = append(errs, err)
		}
	}
	for name, m := range existing {
		if keep[name] {
			continue
		}
		if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting mirror %s/%s: %w", ns, name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.mirrors.done.Store(pool.UID, client.ObjectKeyFromObject(pool))
	return nil
}

// mirrorPayload makes sure the mirror of the pool's payload Secret of hash
// holds it, and says whether it does. The source is read whole, uncached,
// only when the mirror is missing or is not of this pool and hash, and is
// mirrored only if it verifies (secrets.VerifyPayload) and the pool is its
// controller.
func (r *Reconciler) mirrorPayload(ctx context.Context, pool *nodepoolv1.NodePool, hash string, existing map[string]*corev1.Secret) (bool, error) {
	name := secrets.PayloadSecretName(pool.Name, hash)
	mname := secrets.MirrorName(pool.Namespace, name)
	old := existing[mname]
	if old != nil && old.Type == secrets.TypePayload && old.Annotations[secrets.AnnotationPayloadHash] == hash &&
		old.Annotations[secrets.AnnotationMirrorPoolUID] == string(pool.UID) && old.DeletionTimestamp.IsZero() {
		return true, nil
	}
	src := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil // not stored yet: the token mirror waits
		}
		return false, fmt.Errorf("reading payload Secret %s to mirror it: %w", name, err)
	}
	v, err := secrets.VerifyPayload(src, secrets.MaxInflatedBytes)
	if err == nil && v.Owner != pool.UID {
		err = fmt.Errorf("payload Secret %s is controlled by NodePool UID %q, not this pool's", name, v.Owner)
	}
	if err != nil {
		// Refused when the pool's Secrets are read (PayloadRefused);
		// never mirrored.
		return false, nil
	}
	m, err := secrets.NewMirror(r.Settings.MirrorNamespace, src, pool.UID)
	if err != nil {
		return false, err
	}
	if old != nil {
		// Mirrors of payloads are immutable: one that is not this
		// payload's (a pool made again, or written by someone else) is
		// replaced.
		if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("replacing mirror %s: %w", mname, err)
		}
	}
	if err := r.Client.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("mirroring payload Secret %s: %w", name, err)
	}
	return true, nil
}

// mirrorToken writes the mirror of the pool's token Secret name holding t
// (the token as the controller decoded or wrote it), and copies the
// payload server's first-fetch record from the mirror onto the pool's own
// token Secret, where ReachedIgnitionEndpoint and the CLI read it.
func (r *Reconciler) mirrorToken(ctx context.Context, pool *nodepoolv1.NodePool, w *world, name string, t secrets.Token, old *corev1.Secret) error {
	src, err := secrets.NewTokenSecret(pool.Namespace, name, t)
	if err != nil {
		return err
	}
	m, err := secrets.NewMirror(r.Settings.MirrorNamespace, src, pool.UID)
	if err != nil {
		return err
	}
	switch {
	case old == nil:
		if err := r.Client.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("mirroring token Secret %s: %w", name, err)
		}
	case !secrets.MirrorHolds(old, m):
		// A merge patch of what the controller sets: the payload
		// server's first-fetch annotation stays.
		updated := old.DeepCopy()
		updated.Type, updated.Data, updated.Labels = m.Type, m.Data, m.Labels
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		for k, v := range m.Annotations {
			updated.Annotations[k] = v
		}
		if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("updating mirror of token Secret %s: %w", name, err)
		}
	}
	if old == nil {
		return nil
	}
	at, fetched := old.Annotations[secrets.AnnotationFirstFetch]
	own := w.Tokens[name]
	if !fetched || own == nil {
		return nil
	}
	if _, recorded := own.Annotations[secrets.AnnotationFirstFetch]; recorded {
		return nil
	}
	patched := own.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[secrets.AnnotationFirstFetch] = at
	// Adds one annotation: no lock, nothing else of the Secret is sent.
	if err := r.Client.Patch(ctx, patched, client.MergeFrom(own)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("recording the first fetch on token Secret %s: %w", name, err)
	}
	w.Tokens[name] = patched
	return nil
}

// deleteMirrors deletes every mirror of a deleted pool.
func (r *Reconciler) deleteMirrors(ctx context.Context, pool *nodepoolv1.NodePool) error {
	ns := r.Settings.MirrorNamespace
	if ns == "" {
		return nil
	}
	list := &corev1.SecretList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: secrets.MirrorsOf(pool.Namespace, pool.Name)}); err != nil {
		return fmt.Errorf("listing the pool's mirrors: %w", err)
	}
	for i := range list.Items {
		if err := r.Client.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting mirror %s: %w", list.Items[i].Name, err)
		}
	}
	r.mirrors.done.Delete(pool.UID)
	return nil
}

// mirrorSweeper is the runnable (of the leader) that writes the marker
// once every pool that can be mirrored has been since the start, and then
// sweeps the mirror namespace every resync period.
func (r *Reconciler) mirrorSweeper() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		log := ctrl.Log.WithName("mirrors").WithValues("namespace", r.Settings.MirrorNamespace)
		ready := false
		for {
			next := r.Settings.ResyncPeriod
			// Counted every time: the count forgets pools that are gone.
			missing, err := r.unmirrored(ctx)
			if ready && err != nil {
				log.Error(err, "listing the pools mirrored")
			}
			if !ready {
				switch {
				case err != nil:
					log.Error(err, "listing the pools to mirror")
				case missing == 0:
					if err = r.writeMirrorsReady(ctx); err != nil {
						log.Error(err, "marking the mirrors complete")
					} else {
						ready = true
						log.Info("every pool is mirrored", "marker", secrets.MirrorsReadyName)
					}
				default:
					log.V(1).Info("pools not mirrored yet", "count", missing)
				}
				if !ready {
					next = time.Second
				}
			}
			if ready {
				if err := r.sweepMirrors(ctx); err != nil {
					log.Error(err, "sweeping the mirrors of pools that are gone")
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(next):
			}
		}
	})
}

// unmirrored counts the pools of the shard that can be mirrored and were
// not since the start: neither paused nor being deleted (their reconcile
// does not run). It forgets the mirrored pools that are gone.
func (r *Reconciler) unmirrored(ctx context.Context) (int, error) {
	list := &nodepoolv1.NodePoolList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	present := make(map[types.UID]bool, len(list.Items))
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		present[p.UID] = true
		if !r.Settings.Shard.Owns(p.Namespace) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if _, ok := r.mirrors.done.Load(p.UID); ok {
			continue
		}
		cluster, err := r.clusterOf(ctx, p)
		if err != nil {
			return 0, err
		}
		if pausedBy(cluster, p) == "" {
			n++
		}
	}
	r.forgetGone(ctx, present)
	return n, nil
}

// forgetGone forgets the mirrored pools that are not among present (a
// list of every pool) and do not exist now (read again: the pool may have
// come after the list was read, and been mirrored since). One that cannot
// be read is kept until the next count.
func (r *Reconciler) forgetGone(ctx context.Context, present map[types.UID]bool) {
	r.mirrors.done.Range(func(k, v any) bool {
		uid, key := k.(types.UID), v.(types.NamespacedName)
		if present[uid] {
			return true
		}
		p := &nodepoolv1.NodePool{}
		if err := r.Client.Get(ctx, key, p); apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			r.mirrors.done.CompareAndDelete(uid, key)
		}
		return true
	})
}

// writeMirrorsReady creates the marker (one left by an earlier start is
// kept).
func (r *Reconciler) writeMirrorsReady(ctx context.Context) error {
	err := r.Client.Create(ctx, secrets.NewMirrorsReady(r.Settings.MirrorNamespace, r.now()))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// sweepMirrors deletes the mirrors of the shard's pools that are gone (or
// made again: another UID).
func (r *Reconciler) sweepMirrors(ctx context.Context) error {
	list := &corev1.SecretList{}
	sel := client.MatchingLabelsSelector{Selector: secrets.MirrorSelector()}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Settings.MirrorNamespace), sel, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		if !secrets.IsMirror(m) {
			continue // the marker
		}
		ns, pool := m.Labels[secrets.LabelMirrorNamespace], m.Labels[secrets.LabelMirrorPool]
		if !r.Settings.Shard.Owns(ns) {
			continue
		}
		p := &nodepoolv1.NodePool{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool}, p)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		if err == nil && string(p.UID) == m.Annotations[secrets.AnnotationMirrorPoolUID] {
			continue
		}
		if err := r.Client.Delete(ctx, m.DeepCopy(), client.Preconditions{UID: &m.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting mirror %s of a pool that is gone: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}
