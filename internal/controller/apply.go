package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// dangling: payloads, then tokens, then user-data, then the template clone,
// then the MachineDeployment; deletions last.
// templateName is the clone name of the current inputs' template, computed
// once by observe.Latest; the clone is made when the plan targets it.
func (r *Reconciler) apply(ctx context.Context, pool *nodepoolv1.NodePool, in *inputs.Inputs, templateName string, w *world, plan rollout.Plan) error {
	for _, pl := range plan.Payloads {
		if err := r.storePayload(ctx, pool, pl); err != nil {
			return err
		}
	}
	current := map[string]secrets.Token{}
	for _, a := range plan.Tokens {
		t, err := r.applyToken(ctx, pool, w, a)
		if err != nil {
			return err
		}
		current[a.Name] = t
	}
	for _, a := range plan.UserData {
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
		if err := r.applyMachineSet(ctx, pool, w, plan.MachineDeployment); err != nil {
			return err
		}
		if err := r.applyNodeActions(ctx, pool, w, plan, current[plan.InPlaceToken]); err != nil {
			return err
		}
	} else if err := r.applyMachineDeployment(ctx, pool, w, plan.MachineDeployment); err != nil {
		return err
	}
	if err := r.syncNodes(ctx, pool, w); err != nil {
		r.log(pool).Info("node labels and taints not propagated yet", "reason", err.Error())
	}
	for _, name := range plan.Delete {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting unreferenced Secret %s: %w", name, err)
		}
	}
	return nil
}

func (r *Reconciler) storePayload(ctx context.Context, pool *nodepoolv1.NodePool, pl *payload.Payload) error {
	s, err := secrets.NewPayloadSecret(pool.Namespace, payload.PayloadSecretName(pool.Name, pl.Hash), encodePayload(pl))
	if err != nil {
		return fmt.Errorf("encoding payload %s: %w", payload.Short(pl.Hash), err)
	}
	if err := controllerutil.SetControllerReference(pool, s, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storing payload Secret %s: %w", s.Name, err)
	}
	return nil
}

// applyToken creates, repoints or rotates a token Secret. The controller is
// the only writer of tokens.
func (r *Reconciler) applyToken(ctx context.Context, pool *nodepoolv1.NodePool, w *world, a rollout.TokenAction) (secrets.Token, error) {
	now := r.now()
	existing, ok := w.decoded[a.Name]
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
	t.PayloadHash = a.PayloadHash
	s, err := secrets.NewTokenSecret(pool.Namespace, a.Name, t)
	if err != nil {
		return secrets.Token{}, fmt.Errorf("encoding token Secret %s: %w", a.Name, err)
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[annotationRolloutHash] = a.RolloutHash
	if err := controllerutil.SetControllerReference(pool, s, r.Client.Scheme()); err != nil {
		return secrets.Token{}, err
	}
	if old, found := w.tokens[a.Name]; found {
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
		if err := r.Client.Patch(ctx, updated, client.MergeFrom(old)); err != nil {
			return secrets.Token{}, fmt.Errorf("updating token Secret %s: %w", a.Name, err)
		}
	} else if err := r.Client.Create(ctx, s); err != nil {
		return secrets.Token{}, fmt.Errorf("creating token Secret %s: %w", a.Name, err)
	}
	w.decoded[a.Name] = t
	return t, nil
}

// applyUserData writes the pointer config with the token's current token.
// Its name never changes for a token rotation; its content does, so a
// scale-up after a rotation still boots (PRIOR-ART.md, hole 1).
func (r *Reconciler) applyUserData(ctx context.Context, pool *nodepoolv1.NodePool, w *world, a rollout.UserDataAction, tok secrets.Token) error {
	if tok.Current == "" {
		return fmt.Errorf("no token for user-data %s", a.Name)
	}
	old, found := w.userData[a.Name]
	if found && old.Annotations[annotationToken] == secrets.FormatTime(tok.RotatedAt) &&
		old.Annotations[annotationStartedPayload] == a.PayloadHash {
		return nil
	}
	pointer, err := userdata.Render(r.Settings.Inputs.PayloadServerURL, r.Settings.Inputs.PayloadServerCA, tok.Current)
	if err != nil {
		return fmt.Errorf("rendering user-data %s: %w", a.Name, err)
	}
	s := userDataSecret(pool.Namespace, pool.Spec.ClusterName, pool.Name, a.UserData, pointer, tok.RotatedAt)
	if err := controllerutil.SetControllerReference(pool, s, r.Client.Scheme()); err != nil {
		return err
	}
	if found {
		s.ResourceVersion = old.ResourceVersion
		if err := r.Client.Update(ctx, s); err != nil {
			return fmt.Errorf("updating user-data Secret %s: %w", a.Name, err)
		}
		return nil
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating user-data Secret %s: %w", a.Name, err)
	}
	return nil
}

// ensureTemplateClone clones the referenced infrastructure template under
// a name derived from its content, owned by the pool.
func (r *Reconciler) ensureTemplateClone(ctx context.Context, pool *nodepoolv1.NodePool, in *inputs.Inputs, name string) error {
	clone := &unstructured.Unstructured{}
	clone.SetAPIVersion(in.InfrastructureTemplate.APIGroup + "/" + in.InfrastructureTemplate.Version)
	clone.SetKind(in.InfrastructureTemplate.Kind)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, clone); err == nil {
		return nil
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
	clone.Object["spec"] = spec
	if err := controllerutil.SetOwnerReference(pool, clone, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, clone); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cloning infrastructure template to %s: %w", name, err)
	}
	return nil
}

func (r *Reconciler) applyMachineDeployment(ctx context.Context, pool *nodepoolv1.NodePool, w *world, target *rollout.MachineDeploymentTarget) error {
	if w.md == nil {
		if target == nil {
			return nil // nothing valid to boot yet
		}
		md := &clusterv1.MachineDeployment{}
		desiredMachineDeployment(md, pool, target)
		if err := controllerutil.SetControllerReference(pool, md, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, md); err != nil {
			return fmt.Errorf("creating MachineDeployment: %w", err)
		}
		return nil
	}
	md := w.md.DeepCopy()
	desiredMachineDeployment(md, pool, target)
	if equality.Semantic.DeepEqual(md, w.md) {
		return nil
	}
	if err := r.Client.Patch(ctx, md, client.MergeFrom(w.md)); err != nil {
		return fmt.Errorf("patching MachineDeployment: %w", err)
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}
