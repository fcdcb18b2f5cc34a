package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// world is what one reconcile observed of a pool, read once.
type world struct {
	// Objects are the pool's objects as internal/observe read them.
	observe.Objects
	nodes     []corev1.Node
	nodesRead bool
	// external are the changes someone else made to the knobs of the
	// pool's MachineDeployment or MachineSet (external.go), and fresh that
	// object read uncached, with its managedFields, when it was.
	external externalChanges
	fresh    client.Object
	// setRestores are the edited MachineSets of a Replace pool to restore
	// (external_machinesets.go).
	setRestores []setRestore
}

// observe reads the pool's MachineDeployment, MachineSets, Machines and
// owned Secrets (internal/observe, shared with the CLI) and its Nodes, and
// fills the engine's input with them.
func (r *Reconciler) observe(ctx context.Context, pool *nodepoolv1.NodePool, in *rollout.Input) (*world, error) {
	log := r.log(pool)
	decode := observe.PayloadDecoder(observe.DecodeWhole)
	if r.payloads != nil {
		decode = r.payloads.decode
	}
	o, err := observe.ReadWith(ctx, r.Client, pool, in, log, decode)
	if err != nil {
		return nil, err
	}
	w := &world{Objects: *o}
	if err := r.written.check(pool, o.Records, w.cached); err != nil { // own_writes.go
		return nil, err
	}
	r.reportRefusals(pool, o.Refused) // payload_trust.go

	if err := r.trustTokens(ctx, pool, w, in); err != nil { // token_trust.go
		return nil, err
	}
	in.DeletedInUse = deletedInUse(w)
	if err := r.observeNodes(ctx, pool, w, in); err != nil {
		// Not up yet (the first seconds after a start): the engine keeps
		// what the status says of the nodes rather than write that the
		// pool has none.
		log.V(1).Info("nodes not readable yet", "reason", err.Error())
		in.Nodes, in.NodesUnread = nil, true
	}
	observeMachineHealth(pool, w, in) // readinessgate.go
	in.Drains = observe.Drains(w.Machines, in.MachineDeployment)
	if in.InPlace != nil || pool.Spec.Management.Health != nil {
		if err := r.watchNodes(ctx, pool); err != nil {
			log.V(1).Info("nodes not watched yet", "reason", err.Error())
		}
	}
	if in.InPlace != nil {
		r.observeInPlace(ctx, pool, w, in)
	}
	return w, nil
}

// payloadFits refuses a latest payload that is not stored yet and would
// not fit in a payload Secret: it is a bad input like any other, so the
// engine keeps what runs and replicas, labels, taints, history and cleanup
// go on. It returns the payload's size, nil when the payload is stored
// already or absent. A payload whose Secret could not reach the limit
// whatever gzip makes of it (secrets.PayloadDataBound) fits without being
// compressed: it is encoded only when it is written. One nearer the limit
// is encoded and measured, and the Secret it encoded is returned with it.
func payloadFits(pool *nodepoolv1.NodePool, in *rollout.Input) (*corev1.Secret, *payloadSize, error) {
	if in.Latest == nil {
		return nil, nil, nil
	}
	if _, stored := in.Payloads[in.Latest.Hash]; stored {
		return nil, nil, nil
	}
	inflated := inflatedBytes(in.Latest)
	if in.Latest.Ignition != nil && inflated <= secrets.MaxInflatedBytes {
		if bound := secrets.PayloadDataBound(secrets.FromPayload(in.Latest)); bound <= payloadDataLimit {
			return nil, &payloadSize{data: bound, inflated: inflated}, nil
		}
	}
	s, err := secrets.NewPayloadSecret(pool.Namespace, secrets.PayloadSecretName(pool.Name, in.Latest.Hash), secrets.FromPayload(in.Latest))
	if err != nil {
		return nil, nil, err
	}
	if n := secrets.DataBytes(s); n > payloadDataLimit {
		return nil, nil, &rollout.PayloadTooLargeError{Bytes: n, Limit: payloadDataLimit}
	}
	if inflated > secrets.MaxInflatedBytes {
		return nil, nil, &rollout.PayloadTooLargeError{Bytes: inflated, Limit: secrets.MaxInflatedBytes, Inflated: true}
	}
	return s, &payloadSize{data: secrets.DataBytes(s), inflated: inflated}, nil
}

// payloadDataLimit is the most data a payload Secret may hold: room is
// left for the metadata it carries besides.
const payloadDataLimit = secrets.MaxDataBytes - 16<<10

// inflatedBytes is what the payload server or the controller inflates of
// a payload Secret at most in one piece: its Ignition or its fragments.
func inflatedBytes(p *payload.Payload) int {
	fragments := 0
	for _, f := range p.Fragments {
		fragments += len(f)
	}
	return max(len(p.Ignition), fragments)
}
