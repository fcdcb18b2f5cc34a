package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
	"nodepool.dev/nodepool/internal/userdata"
)

// apply carries out a plan, in an order that never leaves a reference
// dangling: payloads, then tokens, then new user-data, then the template
// clone, then the MachineDeployment (or MachineSet) and its
// MachineHealthCheck, then rewrites of existing user-data;
// deletions last. The rollout's history record is written before (see
// Reconcile).
// templateName is the clone name of the current inputs' template, computed
// once by observe.Latest; the clone is made when the plan targets it.
func (r *Reconciler) apply(ctx context.Context, pool *nodepoolv1.NodePool, in *inputs.Inputs, templateName string, w *world, plan rollout.Plan) error {
	if len(w.Conflicts) > 0 {
		return &conflictError{objects: w.Conflicts}
	}
	if err := r.protectInUse(ctx, pool, w); err != nil {
		return err
	}
	for _, pl := range plan.Payloads {
		if err := r.storePayload(ctx, pool, pl); err != nil {
			return err
		}
	}
	current := map[string]secrets.Token{}
	repointed := false
	for _, a := range plan.Tokens {
		if old, ok := w.DecodedTokens[a.Name]; ok && old.PayloadHash != a.PayloadHash {
			repointed = true
		}
		t, err := r.applyToken(ctx, pool, w, a)
		if err != nil {
			return err
		}
		current[a.Name] = t
	}
	if repointed {
		// The payload server serves the mirrors (mirror.go): a token that
		// now serves another payload (a forced rollout's latest, a halt's
		// last healthy one) is mirrored before the MachineDeployment or
		// MachineSet changes, so no machine made for the change boots
		// what the token served before it.
		if err := r.syncMirrors(ctx, pool, w, nil); err != nil {
			return err
		}
	}
	// New user-data exists before anything points at it; an existing
	// one is rewritten after the MachineDeployment (below): its recorded
	// started payload is what pending drift is measured against, so a
	// crash in between never absorbs drift that was not rolled.
	for _, a := range plan.UserData {
		if _, exists := w.UserData[a.Name]; exists {
			continue
		}
		if err := r.applyUserData(ctx, pool, w, a, current[a.TokenName]); err != nil {
			return err
		}
	}
	if plan.MachineDeployment != nil && plan.MachineDeployment.TemplateName != "" && in != nil &&
		plan.MachineDeployment.TemplateName == templateName {
		if err := r.ensureTemplateClone(ctx, pool, in, plan.MachineDeployment.TemplateName); err != nil {
			return err
		}
	}
	if pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		if err := r.recordMachinesUserData(ctx, w); err != nil {
			return err
		}
		if err := r.applyMachineSet(ctx, pool, w, plan.Decision, plan.MachineDeployment); err != nil {
			return err
		}
		if err := r.applyNodeActions(ctx, pool, w, plan, current[plan.InPlaceToken]); err != nil {
			return err
		}
	} else if err := r.applyMachineDeployment(ctx, pool, w, plan.Decision, plan.MachineDeployment); err != nil {
		return err
	}
	if err := r.applyGates(ctx, w, plan.Gates); err != nil { // readinessgate.go
		return err
	}
	if err := r.applyHealthCheck(ctx, pool, plan.Decision.Pause.Paused); err != nil {
		return err
	}
	for _, a := range plan.UserData {
		if _, exists := w.UserData[a.Name]; !exists {
			continue
		}
		if err := r.applyUserData(ctx, pool, w, a, current[a.TokenName]); err != nil {
			return err
		}
	}
	if err := r.syncNodes(ctx, pool, w); err != nil {
		r.log(pool).Info("node labels and taints not propagated yet", "reason", err.Error())
	}
	if err := r.markUnreferenced(ctx, w, plan); err != nil {
		return err
	}
	collected := false
	for _, name := range plan.Delete {
		s := w.secretByName(name)
		if _, ok := w.UserData[name]; ok {
			collected = true
		}
		if s == nil {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: name}}
		}
		if err := r.deleteSecret(ctx, s); err != nil {
			return fmt.Errorf("cleaning up unreferenced Secret: %w", err)
		}
		r.written.deleted(pool, s)
	}
	// The clones of a rollout become unused with its user-data: they are
	// looked for when such user-data is collected.
	if collected {
		keep := []string{templateName}
		if plan.MachineDeployment != nil {
			keep = append(keep, plan.MachineDeployment.TemplateName)
		}
		if err := r.cleanupTemplateClones(ctx, pool, w, false, keep...); err != nil {
			r.log(pool).Info("infrastructure template clones not cleaned up yet", "reason", err.Error())
		}
	}
	return nil
}

func (r *Reconciler) storePayload(ctx context.Context, pool *nodepoolv1.NodePool, pl *payload.Payload) error {
	s, err := r.payloadSecret(pool, pl) // encoded once, by fitsInASecret
	if err != nil {
		return fmt.Errorf("encoding payload %s: %w", payload.Short(pl.Hash), err)
	}
	controllerutil.AddFinalizer(s, nodepoolv1.FinalizerInUse)
	err = r.createOwned(ctx, pool, s, "Secret")
	if errors.Is(err, errNotCached) {
		// Payload Secrets are immutable and encoded deterministically: one
		// of this name controlled by the pool is this payload only if it
		// holds the same bytes (payload_trust.go).
		return r.checkStoredPayload(ctx, s)
	}
	return err
}

// applyToken creates, repoints or rotates a token Secret. The controller is
// the only writer of tokens.
func (r *Reconciler) applyToken(ctx context.Context, pool *nodepoolv1.NodePool, w *world, a rollout.TokenAction) (secrets.Token, error) {
	now := r.now()
	existing, ok := w.DecodedTokens[a.Name]
	if !a.Create && ok && !a.Rotate && existing.PayloadHash == a.PayloadHash {
		return existing, nil
	}
	t := existing
	if !ok {
		t = secrets.Token{Pool: pool.Name}
	}
	if !ok || a.Rotate {
		next, err := secrets.GenerateToken()
		if err != nil {
			return secrets.Token{}, err
		}
		if ok {
			t = t.Rotate(next, now)
		} else {
			t.Current, t.RotatedAt = next, now
		}
	}
	t.PayloadHash, t.RolloutHash = a.PayloadHash, a.RolloutHash
	s, err := secrets.NewTokenSecret(pool.Namespace, a.Name, t)
	if err != nil {
		return secrets.Token{}, fmt.Errorf("encoding token Secret %s: %w", a.Name, err)
	}
	if err := controllerutil.SetControllerReference(pool, s, r.Client.Scheme()); err != nil {
		return secrets.Token{}, err
	}
	key, _, err := r.bindingKey(ctx, false)
	if err != nil {
		return secrets.Token{}, err
	}
	secrets.BindToken(s, key) // token_trust.go
	old, found := w.Tokens[a.Name]
	if !found {
		old, found = w.Unreadable[a.Name]
	}
	if found {
		// A merge patch of data and our annotations only: the payload
		// server writes the first-fetch annotation on the same Secret,
		// and an update would conflict with it or erase it.
		updated := old.DeepCopy()
		updated.Data = s.Data
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		for k, v := range s.Annotations {
			updated.Annotations[k] = v
		}
		if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})); err != nil {
			return secrets.Token{}, fmt.Errorf("updating token Secret %s: %w", a.Name, err)
		}
		r.written.object(pool, updated) // own_writes.go
	} else {
		controllerutil.AddFinalizer(s, nodepoolv1.FinalizerInUse)
		err := r.createOwned(ctx, pool, s, "Secret")
		if errors.Is(err, errNotCached) {
			err = r.checkOwnToken(ctx, pool, a.Name)
		}
		if err != nil {
			return secrets.Token{}, err
		}
		r.written.object(pool, s)
	}
	w.DecodedTokens[a.Name] = t
	return t, nil
}

// applyUserData writes the pointer config with the token's current token.
// Its name never changes for a token rotation; its content does, so a
// scale-up after a rotation still boots.
func (r *Reconciler) applyUserData(ctx context.Context, pool *nodepoolv1.NodePool, w *world, a rollout.UserDataAction, tok secrets.Token) error {
	if tok.Current == "" {
		return fmt.Errorf("no token for user-data %s", a.Name)
	}
	pointer, err := r.pointer(tok.Current)
	if err != nil {
		return fmt.Errorf("rendering user-data %s: %w", a.Name, err)
	}
	s := userDataSecret(pool.Namespace, pool.Spec.ClusterName, pool.Name, a.UserData, pointer, tok.RotatedAt)
	old, found := w.UserData[a.Name]
	if !found {
		controllerutil.AddFinalizer(s, nodepoolv1.FinalizerInUse)
		if err := r.createOwned(ctx, pool, s, "Secret"); err != nil {
			return err
		}
		r.written.object(pool, s) // own_writes.go
		return nil
	}
	// What machines boot is compared, not only the annotations: an edited
	// Secret, or a new payload server URL or CA, is rewritten at once.
	if secretHolds(old, s) {
		return nil
	}
	updated := old.DeepCopy()
	updated.Data, updated.Type = s.Data, s.Type
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range s.Labels {
		updated.Labels[k] = v
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for k, v := range s.Annotations {
		updated.Annotations[k] = v
	}
	if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating user-data Secret %s: %w", a.Name, err)
	}
	r.written.object(pool, updated)
	return nil
}

// secretHolds reports whether Secret old already is desired: the same type and
// data, and every label and annotation of desired (old may have more).
// It is what a merge of desired into old would leave unchanged, compared
// field by field rather than by reflection over both objects.
func secretHolds(old, desired *corev1.Secret) bool {
	return old.Type == desired.Type && maps.EqualFunc(old.Data, desired.Data, bytes.Equal) &&
		includes(old.Labels, desired.Labels) && includes(old.Annotations, desired.Annotations)
}

// includes reports whether m has every entry of sub.
func includes(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// pointer is the user-data (pointer config) of a token. The payload
// server URL and CA are checked once, not at every reconcile of every pool.
func (r *Reconciler) pointer(token string) ([]byte, error) {
	u, ca := r.Settings.Inputs.PayloadServerURL, r.Settings.Inputs.PayloadServerCA
	pr := r.pointers.Load()
	if pr == nil || !pr.Is(u, ca) {
		var err error
		if pr, err = userdata.NewRenderer(u, ca); err != nil {
			return nil, err
		}
		r.pointers.Store(pr)
	}
	return pr.Render(token)
}

// ensureTemplateClone clones the referenced infrastructure template under
// a name derived from its content, owned by the pool.
func (r *Reconciler) ensureTemplateClone(ctx context.Context, pool *nodepoolv1.NodePool, in *inputs.Inputs, name string) error {
	clone := &unstructured.Unstructured{}
	clone.SetAPIVersion(in.InfrastructureTemplate.APIGroup + "/" + in.InfrastructureTemplate.Version)
	clone.SetKind(in.InfrastructureTemplate.Kind)
	// From the cache (the client reads unstructured objects from the API
	// server): a settled pool's reconcile sends no request. A clone just
	// made and not cached yet is created again, found to exist and owned.
	var reader client.Reader = r.Client
	if r.Cache != nil {
		reader = r.Cache
	}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, clone); err == nil {
		if !ownedBy(clone, pool) {
			return &conflictError{objects: []string{in.InfrastructureTemplate.Kind + " " + name}}
		}
		return r.recordTemplateSource(ctx, clone, in.InfrastructureTemplate)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading infrastructure template clone %s: %w", name, err)
	}
	var spec map[string]any
	if err := json.Unmarshal(in.InfrastructureTemplate.Spec, &spec); err != nil {
		return fmt.Errorf("decoding infrastructure template spec: %w", err)
	}
	clone.SetNamespace(pool.Namespace)
	clone.SetName(name)
	clone.SetLabels(map[string]string{nodepoolv1.LabelPool: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName})
	setTemplateSource(clone, in.InfrastructureTemplate)
	clone.Object["spec"] = spec
	clusterOwned(pool, clone)
	if err := r.createOwned(ctx, pool, clone, in.InfrastructureTemplate.Kind); err != nil && !errors.Is(err, errNotCached) {
		return fmt.Errorf("cloning infrastructure template: %w", err)
	}
	return nil
}

func (r *Reconciler) applyMachineDeployment(ctx context.Context, pool *nodepoolv1.NodePool, w *world, d rollout.Decision, target *rollout.MachineDeploymentTarget) error {
	wrote := "" // the forced rollout time written
	set := func(md *clusterv1.MachineDeployment) {
		desiredMachineDeployment(md, pool, d, target)
		// A rollout.after written outside the pool goes back to the
		// controller's: Cluster API then keeps the MachineSet of the
		// pool's template with the most machines (docs/rollouts.md).
		if w.external.restores(rolloutAfterKnob) {
			md.Spec.Rollout.After = ownRolloutAfter(target)
		}
		wrote = forcedTime(md)
	}
	replicas := func(md *clusterv1.MachineDeployment) *int32 { return md.Spec.Replicas }
	read := w.MachineDeployment
	patched, err := createOrPatch(ctx, r, pool, read, &clusterv1.MachineDeployment{}, set, replicas, d, target, "MachineDeployment")
	if err != nil || !patched {
		return err
	}
	r.ownForced.Store(pool.UID, wrote)
	paused := "spec.paused"
	if v, ok := read.Annotations[clusterv1.PausedAnnotation]; ok && v != pausedByDrainHalt && target != nil {
		paused = "the annotation " + clusterv1.PausedAnnotation
		if ptr.Deref(read.Spec.Paused, false) {
			paused = "spec.paused and the annotation " + clusterv1.PausedAnnotation
		}
	} else if !ptr.Deref(read.Spec.Paused, false) {
		return nil
	}
	r.Recorder.Eventf(pool, read, corev1.EventTypeWarning, nodepoolv1.EventMachineDeploymentResumed, "Reconcile",
		"MachineDeployment %s was paused (%s) outside the pool, which would hold its rollouts unseen; resumed it: pause the pool with `kubectl nodepool rollout pause %s -n %s`",
		read.Name, paused, pool.Name, pool.Namespace)
	return nil
}

// scaled is the pool's MachineDeployment (Replace) or MachineSet (InPlace).
type scaled[T any] interface {
	*T
	client.Object
}

// createOrPatch makes the pool's MachineDeployment or MachineSet what set
// writes: it creates fresh when none was read (and there is a target to
// boot), else patches the one read (patchFrom) when set changes it. It
// reports whether it patched.
func createOrPatch[T any, P scaled[T]](ctx context.Context, r *Reconciler, pool *nodepoolv1.NodePool, read, fresh P, set func(P), replicas func(P) *int32,
	d rollout.Decision, target *rollout.MachineDeploymentTarget, kind string) (bool, error) {
	if read == nil {
		if target == nil {
			return false, nil // nothing valid to boot yet
		}
		set(fresh)
		clusterOwned(pool, fresh)
		if err := controllerutil.SetControllerReference(pool, fresh, r.Client.Scheme()); err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, fresh); err != nil {
			return false, fmt.Errorf("creating %s: %w", kind, err)
		}
		r.written.object(pool, fresh) // own_writes.go
		return false, nil
	}
	obj := read.DeepCopyObject().(P)
	set(obj)
	if equality.Semantic.DeepEqual(obj, read) {
		return false, nil
	}
	if err := r.Client.Patch(ctx, obj, patchFrom(d, read, replicas(read), replicas(obj))); err != nil {
		return false, fmt.Errorf("patching %s: %w", kind, err)
	}
	r.written.object(pool, obj)
	return true, nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// markUnreferenced records on user-data Secrets when they were first found
// unused (their cleanup grace period counts from then), and clears the
// mark of those in use again.
func (r *Reconciler) markUnreferenced(ctx context.Context, w *world, plan rollout.Plan) error {
	now := r.now()
	mark := func(name string, set bool) error {
		old, ok := w.UserData[name]
		if !ok {
			return nil
		}
		patched := old.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		var at *time.Time
		if set {
			at = &now
		}
		secrets.MarkUnreferenced(patched.Annotations, at)
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(old)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("marking user-data Secret %s: %w", name, err)
		}
		return nil
	}
	for _, name := range plan.MarkUnreferenced {
		if err := mark(name, true); err != nil {
			return err
		}
	}
	for _, name := range plan.MarkReferenced {
		if err := mark(name, false); err != nil {
			return err
		}
	}
	return nil
}
