package observe

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// Refusal is a payload Secret carrying the pool's label that is not read
// as one of the pool's payloads, and why. Err names the Secret and what is
// wrong with it, never its content.
type Refusal struct {
	Secret *corev1.Secret
	// Reason is one of secrets.RefusedReasons.
	Reason string
	Err    error
}

// readPayload reads payload Secret s as one of the pool's payloads only if
// the controller could have written it: the pool is its controller, its
// name is the one the controller gives the payload it claims
// (secrets.CheckPayloadName, checked before anything is read or
// inflated), and its content gives that payload's hash (decode, through
// secrets.DecodePayload or the controller's memo). Labels, annotations and
// an owner reference can be copied by anyone who can create Secrets in
// the namespace; a name cannot be taken twice. So a Secret read here is,
// in what the controller reads of it, the genuine payload of its hash.
//
// Anything else is refused (o.Refused) and never read, protected or
// deleted as the pool's; a Secret of the pool's label that is not the
// pool's and has no name of the pool's payloads is someone else's, and
// ignored silently.
func readPayload(ctx context.Context, pool *nodepoolv1.NodePool, s *corev1.Secret, o *Objects, in *rollout.Input, decode PayloadDecoder, log logr.Logger) {
	named := secrets.CheckPayloadName(s)
	if !metav1.IsControlledBy(s, pool) {
		if named == nil {
			o.Refused = append(o.Refused, Refusal{Secret: s, Reason: secrets.RefusedNotOwned,
				Err: fmt.Errorf("payload Secret %s/%s has the name of one of NodePool %s's payloads but is not controlled by it (UID %s)", s.Namespace, s.Name, pool.Name, pool.UID)})
		}
		return
	}
	if named != nil {
		o.Refused = append(o.Refused, Refusal{Secret: s, Reason: secrets.RefusalReason(named), Err: named})
		return
	}
	pl, err := decode(ctx, pool.Name, s)
	var refused *secrets.RefusedError
	if errors.As(err, &refused) {
		o.Refused = append(o.Refused, Refusal{Secret: s, Reason: refused.Reason, Err: err})
		return
	}
	if err != nil {
		// Not about the Secret (the API server did not answer, say): the
		// next reconcile reads it again.
		log.Info("payload Secret not read", "secret", s.Name, "reason", err.Error())
		return
	}
	if pl.Hash != secrets.PayloadHashOf(s) {
		// A decoder's bug, never a Secret's: refuse rather than file a
		// payload under another hash.
		o.Refused = append(o.Refused, Refusal{Secret: s, Reason: secrets.RefusedHashMismatch,
			Err: fmt.Errorf("payload Secret %s/%s decoded as payload %s, not the one it claims", s.Namespace, s.Name, pl.Hash)})
		return
	}
	o.Payloads[pl.Hash] = s
	in.Payloads[pl.Hash] = pl
}
