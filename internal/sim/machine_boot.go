package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/userdata"
)

// bootStep is where a machine's boot stands after one attempt: the reason
// and message of its Booted condition, when to try again (0: when
// something changes), and, once it booted, what the payload said.
type bootStep struct {
	reason     string
	message    string
	retryAfter time.Duration
	booted     *payload.Booted
	// failAfter is the payload's fail-after marker (failmarker.go).
	failAfter *time.Duration
}

// boot runs a machine's first boot as far as it goes today: bootstrap data,
// power-on delay, user-data, payload fetch (retried with backoff on 5xx or
// no answer, like Ignition), payload validation. It returns an error only
// when the management API server fails; everything about the machine
// itself is in the step.
func (r *machineReconciler) boot(ctx context.Context, sm *simv1.SimMachine, machine *clusterv1.Machine, k knobs) (bootStep, error) {
	name := machine.Spec.Bootstrap.DataSecretName
	if name == nil || *name == "" {
		return bootStep{reason: simv1.ReasonWaitingForBootstrapData,
			message: fmt.Sprintf("Machine %s has no spec.bootstrap.dataSecretName yet", machine.Name)}, nil
	}
	if k.failBoot {
		return bootStep{reason: simv1.ReasonBootFailed,
			message: fmt.Sprintf("told to fail (spec.failBoot or annotation %s): the machine does not boot while that is set", simv1.AnnotationFailBoot)}, nil
	}
	if up := sm.CreationTimestamp.Add(k.bootDelay); r.now().Before(up) {
		wait := up.Sub(r.now())
		return bootStep{reason: simv1.ReasonBooting, retryAfter: wait,
			message: fmt.Sprintf("powering on: boot delay %s, fetches its payload at %s", k.bootDelay, up.UTC().Format(time.RFC3339))}, nil
	}

	s := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: sm.Namespace, Name: *name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return bootStep{reason: simv1.ReasonWaitingForBootstrapData,
				message: fmt.Sprintf("bootstrap data Secret %s does not exist yet (or is not of type %s)", *name, clusterv1.ClusterSecretType)}, nil
		}
		return bootStep{}, fmt.Errorf("reading bootstrap data Secret %s/%s: %w", sm.Namespace, *name, err)
	}
	raw, err := userdata.ReadBootstrapSecret(s)
	if err != nil {
		return bootStep{reason: simv1.ReasonInvalidUserData, message: err.Error()}, nil
	}
	pointer, err := userdata.Parse(raw)
	if err != nil {
		return bootStep{reason: simv1.ReasonInvalidUserData,
			message: fmt.Sprintf("user-data of Secret %s: %v; fix the Secret and the machine tries again", *name, err)}, nil
	}

	body, err := r.fetcher.fetch(ctx, pointer)
	if err != nil {
		return r.fetchFailed(ctx, sm, err), nil
	}
	if err := pointer.Verify(body); err != nil {
		return bootStep{reason: simv1.ReasonInvalidPayload, message: fmt.Sprintf("payload from %s: %v", pointer.URL, err)}, nil
	}
	booted, err := payload.Inspect(body)
	if err != nil {
		return bootStep{reason: simv1.ReasonInvalidPayload,
			message: fmt.Sprintf("payload from %s: %v; the machine stays down, as Ignition would leave it", pointer.URL, err)}, nil
	}
	fail, err := failAfter(body)
	if err != nil {
		return bootStep{reason: simv1.ReasonInvalidPayload, message: fmt.Sprintf("payload from %s: %v", pointer.URL, err)}, nil
	}
	return bootStep{reason: simv1.ReasonBooted, booted: booted, failAfter: fail}, nil
}

// retryDelay counts a failed fetch and returns when to try again. The
// attempt count goes to the log, not the condition, so a waiting machine
// does not rewrite its status at every attempt.
func (r *machineReconciler) retryDelay(ctx context.Context, sm *simv1.SimMachine, err error) time.Duration {
	delay, attempts := r.backoff.next(sm.UID)
	ctrl.LoggerFrom(ctx).V(1).Info("Payload fetch failed, retrying", "attempt", attempts, "retryAfter", delay, "error", describeFetchError(err))
	return delay
}

// fetchFailed turns a failed fetch into a step: retried with backoff on a
// 5xx answer or no answer, final on any other answer, as Ignition does.
func (r *machineReconciler) fetchFailed(ctx context.Context, sm *simv1.SimMachine, err error) bootStep {
	var he *HTTPError
	switch {
	case errors.As(err, &he) && he.Retried():
		hint := ""
		if he.StatusCode == 511 {
			hint = ": the payload server does not know the user-data's token (not created yet, expired or rotated away)"
		}
		return bootStep{reason: simv1.ReasonPayloadServerRefused, retryAfter: r.retryDelay(ctx, sm, he),
			message: fmt.Sprintf("%s%s; retrying with backoff like Ignition", he, hint)}
	case he != nil:
		r.backoff.forget(sm.UID)
		return bootStep{reason: simv1.ReasonPayloadServerRefused,
			message: fmt.Sprintf("%s; Ignition does not retry this answer, so the machine stays down until its user-data changes", he)}
	case errors.Is(err, errPayloadTooLarge):
		return bootStep{reason: simv1.ReasonInvalidPayload, message: err.Error()}
	default:
		return bootStep{reason: simv1.ReasonPayloadServerUnreachable, retryAfter: r.retryDelay(ctx, sm, err),
			message: fmt.Sprintf("no answer from the payload server: %s; retrying with backoff like Ignition", describeFetchError(err))}
	}
}
