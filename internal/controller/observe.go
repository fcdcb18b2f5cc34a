package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// world is what one reconcile observed of a pool, read once.
type world struct {
	md        *clusterv1.MachineDeployment
	ms        *clusterv1.MachineSet
	machines  []clusterv1.Machine
	userData  map[string]*corev1.Secret
	tokens    map[string]*corev1.Secret
	decoded   map[string]secrets.Token
	payloads  map[string]*corev1.Secret
	nodes     []corev1.Node
	nodesRead bool
}

// observe reads the pool's MachineDeployment, MachineSets, Machines and
// owned Secrets (internal/observe, shared with the CLI) and its Nodes, and
// fills the engine's input with them.
func (r *Reconciler) observe(ctx context.Context, pool *nodepoolv1.NodePool, in *rollout.Input) (*world, error) {
	log := r.log(pool)
	o, err := observe.Read(ctx, r.Client, pool, in, log)
	if err != nil {
		return nil, err
	}
	w := &world{md: o.MachineDeployment, ms: o.InPlaceSet, machines: o.Machines, userData: o.UserData, tokens: o.Tokens, decoded: o.DecodedTokens, payloads: o.Payloads}
	if err := r.observeNodes(ctx, pool, w, in); err != nil {
		log.V(1).Info("nodes not readable yet", "reason", err.Error())
	}
	if in.InPlace != nil {
		if err := r.watchNodes(ctx, pool); err != nil {
			log.V(1).Info("nodes not watched yet", "reason", err.Error())
		}
		r.observeInPlace(ctx, pool, w, in)
	}
	return w, nil
}

// encodePayload is the inverse of observe.DecodePayload.
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
