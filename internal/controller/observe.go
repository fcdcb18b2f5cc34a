package controller

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// world is what one reconcile observed of a pool, read once.
type world struct {
	md        *clusterv1.MachineDeployment
	machines  []clusterv1.Machine
	userData  map[string]*corev1.Secret
	tokens    map[string]*corev1.Secret
	decoded   map[string]secrets.Token
	payloads  map[string]*corev1.Secret
	nodes     []corev1.Node
	nodesRead bool
}

// observe reads the pool's MachineDeployment, MachineSets, Machines and
// owned Secrets, and fills the engine's input with them.
func (r *Reconciler) observe(ctx context.Context, pool *nodepoolv1.NodePool, in *rollout.Input) (*world, error) {
	w := &world{userData: map[string]*corev1.Secret{}, tokens: map[string]*corev1.Secret{}, decoded: map[string]secrets.Token{}, payloads: map[string]*corev1.Secret{}}
	ns := client.InNamespace(pool.Namespace)
	owned := client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: pool.Name, clusterv1.ClusterNameLabel: pool.Spec.ClusterName}

	md := &clusterv1.MachineDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Name}, md); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading MachineDeployment: %w", err)
	} else if err == nil {
		w.md = md
	}
	msList := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, msList, ns, owned); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	mList := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, mList, ns, owned); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	w.machines = mList.Items

	in.Referenced = map[string]bool{}
	refer := func(name *string) {
		if name != nil && *name != "" {
			in.Referenced[*name] = true
		}
	}
	if w.md != nil {
		refer(w.md.Spec.Template.Spec.Bootstrap.DataSecretName)
	}
	for i := range msList.Items {
		refer(msList.Items[i].Spec.Template.Spec.Bootstrap.DataSecretName)
	}
	for i := range mList.Items {
		refer(mList.Items[i].Spec.Bootstrap.DataSecretName)
	}

	sList := &corev1.SecretList{}
	if err := r.Client.List(ctx, sList, ns, client.MatchingLabels{secrets.LabelPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing the pool's Secrets: %w", err)
	}
	in.UserData = map[string]rollout.UserData{}
	in.Tokens = map[string]rollout.Token{}
	in.Payloads = map[string]*payload.Payload{}
	log := r.log(pool)
	for i := range sList.Items {
		s := &sList.Items[i]
		if !metav1IsControlledBy(s, pool) {
			continue
		}
		switch secrets.KindOf(s) {
		case KindUserData:
			w.userData[s.Name] = s
			in.UserData[s.Name] = decodeUserData(s)
		case secrets.KindToken:
			t, err := secrets.DecodeToken(s)
			if err != nil {
				log.Error(err, "ignoring an unreadable token Secret", "secret", s.Name)
				continue
			}
			w.tokens[s.Name], w.decoded[s.Name] = s, t
			tok := rollout.Token{Name: s.Name, RolloutHash: s.Annotations[annotationRolloutHash], PayloadHash: t.PayloadHash, RotatedAt: t.RotatedAt, Created: s.CreationTimestamp.Time}
			if at, ok, _ := secrets.FirstFetch(s); ok {
				tok.FirstFetch = &at
			}
			in.Tokens[s.Name] = tok
		case secrets.KindPayload:
			pl, err := decodePayload(pool.Name, s)
			if err != nil {
				log.Error(err, "ignoring an unreadable payload Secret", "secret", s.Name)
				continue
			}
			w.payloads[pl.Hash] = s
			in.Payloads[pl.Hash] = pl
		}
	}

	if w.md != nil {
		in.MachineDeployment = summarize(w.md, msList.Items)
	}
	if err := r.observeNodes(ctx, pool, w, in); err != nil {
		log.V(1).Info("nodes not readable yet", "reason", err.Error())
	}
	return w, nil
}

// summarize reduces a MachineDeployment and its MachineSets to what the
// engine needs: the target, what the machines run, and whether the rollout
// is complete.
func summarize(md *clusterv1.MachineDeployment, sets []clusterv1.MachineSet) *rollout.MachineDeployment {
	target := ptr.Deref(md.Spec.Template.Spec.Bootstrap.DataSecretName, "")
	out := &rollout.MachineDeployment{
		DataSecretName:   target,
		Version:          md.Spec.Template.Spec.Version,
		Replicas:         ptr.Deref(md.Status.Replicas, 0),
		ReadyReplicas:    ptr.Deref(md.Status.ReadyReplicas, 0),
		UpToDateReplicas: ptr.Deref(md.Status.UpToDateReplicas, 0),
	}
	// Machine sets that still have machines, oldest first.
	var live []clusterv1.MachineSet
	for _, ms := range sets {
		if ptr.Deref(ms.Status.Replicas, 0) > 0 || ptr.Deref(ms.Spec.Replicas, 0) > 0 {
			live = append(live, ms)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		return live[i].CreationTimestamp.Before(&live[j].CreationTimestamp)
	})
	out.RunningDataSecretName = target
	if len(live) > 0 {
		out.RunningDataSecretName = ptr.Deref(live[0].Spec.Template.Spec.Bootstrap.DataSecretName, target)
	}
	desired := ptr.Deref(md.Spec.Replicas, 0)
	onlyTarget := true
	for _, ms := range live {
		if ptr.Deref(ms.Spec.Template.Spec.Bootstrap.DataSecretName, "") != target || ms.Spec.Template.Spec.Version != md.Spec.Template.Spec.Version {
			onlyTarget = false
		}
	}
	out.Complete = md.Status.ObservedGeneration >= md.Generation && onlyTarget &&
		out.UpToDateReplicas == desired && out.Replicas == desired
	if desired == 0 {
		out.Complete = onlyTarget && md.Status.ObservedGeneration >= md.Generation
	}
	return out
}

// decodePayload reads a payload Secret back into a payload, fragments and all.
func decodePayload(pool string, s *corev1.Secret) (*payload.Payload, error) {
	sp, err := secrets.DecodePayload(s)
	if err != nil {
		return nil, err
	}
	frags := make(map[inputs.Component][]byte, len(sp.Fragments))
	for name, f := range sp.Fragments {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return nil, fmt.Errorf("payload Secret %s: %w", s.Name, err)
		}
		frags[c] = f
	}
	manifest := make(payload.Manifest, len(sp.Manifest))
	for name, d := range sp.Manifest {
		c, err := inputs.ParseComponent(name)
		if err != nil {
			return nil, fmt.Errorf("payload Secret %s: %w", s.Name, err)
		}
		manifest[c] = d
	}
	return &payload.Payload{Pool: pool, Ignition: sp.Ignition, Fragments: frags, Manifest: manifest, Hash: sp.Hash}, nil
}

// encodePayload is the inverse of decodePayload.
func encodePayload(p *payload.Payload) secrets.Payload {
	out := secrets.Payload{Pool: p.Pool, Hash: p.Hash, Ignition: p.Ignition, Manifest: map[string]string{}, Fragments: map[string][]byte{}}
	for c, d := range p.Manifest {
		out.Manifest[c.Name()] = d
	}
	for c, f := range p.Fragments {
		out.Fragments[c.Name()] = f
	}
	return out
}
