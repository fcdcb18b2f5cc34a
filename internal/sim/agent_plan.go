package sim

import (
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/payload"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// The sim's node agent takes part in the node update protocol of InPlace
// pools (api/v1alpha1/nodeupdate.go) for every machine that booted: when
// the controller writes a desired payload on the machine's Node, the agent
// reports Working, waits the machine's update delay, fetches the payload
// with the pointer config of the update Secret, checks it is the desired
// one, swaps the old payload's Node labels for the new one's and reports
// the new current payload and Done; or Degraded, saying why. This file
// decides; agent_controller.go and agent_update.go do the I/O.

// nodeUpdate is what the agent reads of a Node's update annotations.
type nodeUpdate struct {
	desired, current, state, message string
	// started is when the agent started the update it works on
	// (simv1.AnnotationUpdateStarted); zero when it has not, or no longer.
	started time.Time
}

func readNodeUpdate(n *corev1.Node) nodeUpdate {
	a := n.Annotations
	u := nodeUpdate{
		desired: a[nodepoolv1.AnnotationDesiredPayload],
		current: a[nodepoolv1.AnnotationNodeCurrentPayload],
		state:   a[nodepoolv1.AnnotationUpdateState],
		message: a[nodepoolv1.AnnotationUpdateMessage],
	}
	// A start that does not parse is no start: the agent starts again.
	if t, err := time.Parse(time.RFC3339Nano, a[simv1.AnnotationUpdateStarted]); err == nil {
		u.started = t
	}
	return u
}

// agentAction is what the agent does next for one Node.
type agentAction int

const (
	// agentIdle: nothing to do (no update asked, or it is done).
	agentIdle agentAction = iota
	// agentForget: no update asked any more (the controller gave it up):
	// forget the start of the one the agent was working on.
	agentForget
	// agentFail: report Degraded with the plan's message (the fail knob),
	// forgetting the start, and do nothing else.
	agentFail
	// agentStart: report Working, clear the message, record the start.
	agentStart
	// agentWait: look again after the plan's delay (update delay, retry).
	agentWait
	// agentApply: fetch the desired payload, check it and apply it.
	agentApply
)

func (a agentAction) String() string {
	return [...]string{"Idle", "Forget", "Fail", "Start", "Wait", "Apply"}[a]
}

// agentPlan is the agent's decision for one Node.
type agentPlan struct {
	action agentAction
	// message is the Degraded message of agentFail.
	message string
	// after is the delay of agentWait.
	after time.Duration
}

// planUpdate decides what the agent does with a Node's update, given the
// machine's knobs, when a failed attempt at the same desired payload may be
// retried (zero: now) and the time.
//
// A Degraded update the agent started itself (the start is recorded) is
// retried as it is, so it stays Degraded until an attempt succeeds; one it
// did not start (the fail knob forgets the start) starts over as Working.
func planUpdate(u nodeUpdate, k knobs, retryAt, now time.Time) agentPlan {
	switch {
	case u.desired == "" && !u.started.IsZero():
		return agentPlan{action: agentForget}
	case u.desired == "":
		return agentPlan{action: agentIdle}
	case u.current == u.desired && u.state == nodepoolv1.UpdateStateDone:
		return agentPlan{action: agentIdle}
	case k.failUpdate != "":
		msg := failUpdateMessage(k.failUpdate)
		if u.state == nodepoolv1.UpdateStateDegraded && u.message == msg && u.started.IsZero() {
			return agentPlan{action: agentIdle}
		}
		return agentPlan{action: agentFail, message: msg}
	case u.started.IsZero() || (u.state != nodepoolv1.UpdateStateWorking && u.state != nodepoolv1.UpdateStateDegraded):
		return agentPlan{action: agentStart}
	}
	wait := retryAt.Sub(now)
	if u.state == nodepoolv1.UpdateStateWorking {
		wait = max(wait, u.started.Add(k.updateDelay).Sub(now))
	}
	if wait > 0 {
		return agentPlan{action: agentWait, after: wait}
	}
	return agentPlan{action: agentApply}
}

// failUpdateMessage is the Degraded message of a machine told to fail its
// updates: the knob's message, saying it comes from the sim.
func failUpdateMessage(why string) string {
	return fmt.Sprintf("sim knob (spec.failUpdate or annotation %s): %s", simv1.AnnotationFailUpdate, why)
}

// appliedLabels returns a Node's labels once it runs a new payload: the
// labels the old payload set and the new one does not are gone, the new
// payload's are set, every other label stays.
func appliedLabels(node, oldPayload, newPayload map[string]string) map[string]string {
	out := make(map[string]string, len(node)+len(newPayload))
	maps.Copy(out, node)
	for k := range oldPayload {
		if _, kept := newPayload[k]; !kept {
			delete(out, k)
		}
	}
	maps.Copy(out, newPayload)
	return out
}

// updateOutcome is where one attempt to fetch the desired payload ended:
// applied (booted is set), or not, with the state to report (Working for a
// cause that should pass by itself, Degraded for one that needs a fix) and
// why. Every failed attempt is retried with backoff: the agent cannot watch
// the workload cluster's Secrets or the payload server, and a Degraded
// update is retried once its cause is gone.
type updateOutcome struct {
	state   string
	message string
	booted  *payload.Booted
	// failAfter is the applied payload's fail-after marker (failmarker.go).
	failAfter *time.Duration
}

func working(format string, args ...any) updateOutcome {
	return updateOutcome{state: nodepoolv1.UpdateStateWorking, message: fmt.Sprintf(format, args...)}
}

func degraded(format string, args ...any) updateOutcome {
	return updateOutcome{state: nodepoolv1.UpdateStateDegraded, message: fmt.Sprintf(format, args...)}
}

// fetchOutcome turns a failed fetch of the payload the update Secret
// points to into an outcome: an answer the payload server may change its
// mind about (5xx, 511 for a token it does not know yet) or no answer is
// Working; any other answer or a payload too large is Degraded.
func fetchOutcome(err error, secret string) updateOutcome {
	var he *HTTPError
	switch {
	case errors.As(err, &he) && he.Retried():
		hint := ""
		if he.StatusCode == 511 {
			hint = ": the payload server does not know the token (not created yet, expired or rotated away)"
		}
		return working("fetching the payload of update Secret %s: %s%s; retrying with backoff", secret, he, hint)
	case he != nil:
		return degraded("fetching the payload of update Secret %s: %s", secret, he)
	case errors.Is(err, errPayloadTooLarge):
		return degraded("fetching the payload of update Secret %s: %v", secret, err)
	default:
		return working("fetching the payload of update Secret %s: no answer from the payload server: %s; retrying with backoff", secret, describeFetchError(err))
	}
}

// checkPayload compares the payload fetched with the desired one: another
// payload means the payload server still serves the token's previous one
// (the controller may be repointing it), so the agent waits and retries.
func checkPayload(booted *payload.Booted, desired, secret string) updateOutcome {
	if booted.Hash != desired {
		return working("the payload server serves payload %s for update Secret %s, not the desired %s; retrying",
			payload.Short(booted.Hash), secret, payload.Short(desired))
	}
	return updateOutcome{booted: booted}
}
