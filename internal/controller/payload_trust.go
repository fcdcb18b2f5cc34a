package controller

import (
	"bytes"
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/secrets"
)

// Which Secrets the controller trusts as its own. An owner reference,
// labels and annotations prove nothing: anyone who can create Secrets in a
// pool's namespace can copy them. A Secret is the pool's only if the pool
// is its controller AND its name is the one the controller gives it
// (names are unique in a namespace); a payload Secret's content must also
// give the hash it claims (observe.readPayload). Everything else is
// refused: never read as the pool's, never protected with the in-use
// finalizer, never adopted.

// payloadsRefused counts payload Secret versions refused, by reason
// (secrets.RefusedReasons). No pool label: a forger could otherwise make
// series at will; the event on the pool names the Secret.
var payloadsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodepool_payload_refused_total",
	Help: "Payload and token Secrets carrying a pool's label that the controller refused to use, by reason (invalid, name_mismatch, content_mismatch, hash_mismatch, not_owned, unbound_token); each Secret version counts once.",
}, []string{"reason"})

func init() {
	metrics.Registry.MustRegister(payloadsRefused)
	for _, r := range secrets.RefusedReasons {
		payloadsRefused.WithLabelValues(r)
	}
}

// reportRefusals says once per Secret version (while r.refusals remembers
// it) that a payload Secret is refused: a Warning event on the pool, the
// metric and a log line, each naming the Secret and why, never its content.
func (r *Reconciler) reportRefusals(pool *nodepoolv1.NodePool, refused []observe.Refusal) {
	for _, f := range refused {
		key := string(f.Secret.UID) + "/" + f.Secret.ResourceVersion
		if r.refusals != nil {
			if _, seen := r.refusals.get(key); seen {
				continue
			}
			r.refusals.put(key, true)
		}
		payloadsRefused.WithLabelValues(f.Reason).Inc()
		r.log(pool).Info("refusing a Secret: it is never read, protected or served as the pool's", "kind", secrets.KindOf(f.Secret), "secret", f.Secret.Name, "reason", f.Reason, "detail", f.Err.Error())
		// The Secret is the event's related object: events of the same
		// regarding, reason and action are merged into one series
		// otherwise, and a second refused Secret would go unnamed.
		kind := "payload"
		if secrets.KindOf(f.Secret) == secrets.KindToken {
			kind = "token"
		}
		r.Recorder.Eventf(pool, f.Secret, corev1.EventTypeWarning, nodepoolv1.EventPayloadRefused, "Read",
			"%s Secret %s refused (%s): %v", kind, f.Secret.Name, f.Reason, f.Err)
	}
}

// namedByController reports whether s, one of the pool's Secrets of kind,
// has the name the controller gives a Secret of that kind and its hashes
// (a payload Secret's is checked when it is read, observe.readPayload).
func namedByController(pool *nodepoolv1.NodePool, w *world, kind string, s *corev1.Secret) bool {
	switch kind {
	case secrets.KindToken:
		t, ok := w.DecodedTokens[s.Name]
		return ok && t.RolloutHash != "" && s.Name == secrets.TokenSecretName(pool.Name, t.RolloutHash)
	case secrets.KindUserData:
		h := secrets.DecodeUserData(s).RolloutHash
		return h != "" && s.Name == secrets.UserDataSecretName(pool.Name, h)
	case secrets.KindPayload:
		return secrets.CheckPayloadName(s) == nil
	}
	return false
}

// checkStoredPayload checks that the payload Secret of want's name, which
// exists and is controlled by the pool, holds exactly what the controller
// writes for that payload (payload Secrets are immutable and encoded
// deterministically): one made first by someone else is never adopted.
func (r *Reconciler) checkStoredPayload(ctx context.Context, want *corev1.Secret) error {
	got := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return fmt.Errorf("reading the existing payload Secret %s: %w", want.Name, err)
	}
	same := len(got.Data) == len(want.Data)
	for k, v := range want.Data {
		same = same && bytes.Equal(got.Data[k], v)
	}
	if !same {
		// Reported as a name conflict; reading it reports it as refused
		// (observe.readPayload), once per version.
		return &conflictError{objects: []string{"Secret " + want.Name + " (not the payload the controller writes under this name)"}}
	}
	return nil
}
