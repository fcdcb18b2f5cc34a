package rollout

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/payload"
)

// planStatus writes the status fields and the conditions other than
// ConfigUpdatePending: validity of the inputs, the rollout in progress
// (with what holds an in-place update), whether machines fetched their
// payload, readiness and node health.
func planStatus(in Input, d Decision, hold inPlaceHold, p *Plan) {
	planValidity(in, p)

	md := in.MachineDeployment
	running, target := d.Running, d.Target
	rolling := replacing(md, running, target)
	forcing := d.Action == ActionForce || forcedInProgress(md)
	p.Version = in.Pool.Status.Version
	if running != nil && (md == nil || md.Complete) {
		p.Version = running.Version
	}
	updatingConfig := rolling && running.RolloutWithoutVersion != target.RolloutWithoutVersion
	updatingVersion := rolling && running.Version != target.Version
	var updating []string
	if updatingConfig {
		updating = append(updating, "Config")
	}
	if updatingVersion {
		updating = append(updating, "Version")
	}
	if forcing && !updatingConfig && !updatingVersion {
		updating = append(updating, "Forced")
	}
	p.Updating = strings.Join(updating, ",")

	progress := ""
	if md != nil {
		progress = fmt.Sprintf(" (%d of %d machines up to date)", md.UpToDateReplicas, d.Replicas)
	}
	deferred := pendingWhilePaused(in, d)
	if f := d.Forced; deferred == "" && f != nil && f.State == ForcedDeferred {
		deferred = fmt.Sprintf("a forced rollout (%s, machines created before %s) is pending; the pool is paused", f.Initiator, f.At.Format(time.RFC3339))
	}
	configCond := updatingCondition(nodepoolv1.ConditionUpdatingConfig, updatingConfig || (forcing && !updatingVersion), deferred,
		fmt.Sprintf("rolling out configuration %s%s", shortOf(target, func(u *UserData) string { return u.RolloutWithoutVersion }), progress))
	if forcing && !updatingConfig {
		configCond.Message = "replacing every machine (forced rollout)" + progress
	}
	if f := d.Forced; f != nil && f.State == ForcedScheduled && !updatingConfig && !forcing {
		configCond.Reason = nodepoolv1.ReasonRolloutScheduled
		configCond.Message = fmt.Sprintf("a forced rollout (%s) is scheduled: every machine created before %s will be replaced then",
			f.Initiator, f.At.Format(time.RFC3339))
	}
	versionCond := updatingCondition(nodepoolv1.ConditionUpdatingVersion, updatingVersion, deferred,
		fmt.Sprintf("rolling out version %s%s", versionOf(target), progress))
	if reason, msg := fixWaits(in, d); reason != "" {
		// Nothing rolls: the halted rollout stands still and the change
		// that ends it waits.
		for _, c := range []*metav1.Condition{&configCond, &versionCond} {
			if c.Status == metav1.ConditionTrue {
				c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, msg
			}
		}
	}
	for _, c := range []*metav1.Condition{&configCond, &versionCond} {
		hold.explain(c)
	}
	p.Conditions = append(p.Conditions, configCond, versionCond)
	p.Complete = onTarget(md, running, target) && !forcing && p.Record == nil && !d.Halted()
	switch {
	case p.Record != nil && d.Action == ActionForce && !forcedInProgress(md) && onTarget(md, running, target) && !d.Halted():
		// The rollout in progress had reached every machine when the
		// forced one starts, in the same look (a rollback that replaced
		// only the failed rollout's machines, then the forced request it
		// held): it completed, it was not superseded.
		p.Finish, p.FinishedAt = OutcomeComplete, in.Now
	case p.Record != nil:
		p.Finish, p.FinishedAt = OutcomeSuperseded, p.Record.Started
	case p.Complete:
		p.Finish, p.FinishedAt = OutcomeComplete, in.Now
	}
	if justCompleted(in, running, target) && !forcing {
		p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutComplete,
			Message: fmt.Sprintf("every machine runs %s (version %s)", target.Name, target.Version)})
	}

	planReached(in, d, p)
	planNodes(in, p)
	planReady(in, d, p)
}

func planValidity(in Input, p *Plan) {
	valid := metav1.Condition{Type: nodepoolv1.ConditionValidMachineConfig, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	payloadOK := metav1.Condition{Type: nodepoolv1.ConditionValidGeneratedPayload, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	if in.RenderErr != nil {
		keep := "; running nodes keep running and new machines boot the payload the pool already serves"
		var tooLarge *PayloadTooLargeError
		if errors.As(in.RenderErr, &tooLarge) {
			payloadOK.Status, payloadOK.Reason, payloadOK.Message = metav1.ConditionFalse, nodepoolv1.ReasonPayloadTooLarge, in.RenderErr.Error()+keep
		} else if reason := inputs.Reason(in.RenderErr); reason != "" {
			valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, reason, in.RenderErr.Error()+keep
			payloadOK.Status, payloadOK.Reason, payloadOK.Message = metav1.ConditionUnknown, reason, "not rendered: the inputs are not valid"
		} else {
			payloadOK.Status, payloadOK.Reason, payloadOK.Message = metav1.ConditionFalse, nodepoolv1.ReasonInvalidPayload, in.RenderErr.Error()+keep
		}
	}
	p.Conditions = append(p.Conditions, valid, payloadOK)
}

// PayloadTooLargeError says the rendered payload does not fit in a Secret.
type PayloadTooLargeError struct {
	// Bytes is the size of the payload Secret's data; Limit the most the
	// API server stores.
	Bytes, Limit int
	// Inflated says the limit is on the uncompressed Ignition config (what
	// the payload server serves), not on the Secret.
	Inflated bool
}

func (e *PayloadTooLargeError) Error() string {
	if e.Inflated {
		return fmt.Sprintf("the rendered payload is %d bytes uncompressed, more than the %d bytes the payload server serves: make the configs in spec.config smaller", e.Bytes, e.Limit)
	}
	return fmt.Sprintf("the rendered payload needs a Secret of %d bytes (compressed), more than the %d bytes a Secret may hold: make the configs in spec.config smaller", e.Bytes, e.Limit)
}

func updatingCondition(t string, updating bool, deferred string, msg string) metav1.Condition {
	c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: nodepoolv1.ReasonAsExpected}
	switch {
	case updating:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, nodepoolv1.ReasonRolloutInProgress, msg
	case deferred != "":
		c.Reason, c.Message = nodepoolv1.ReasonPaused, deferred
	}
	return c
}

// fixWaits says, for a halted rollout whose end waits, why it waits and
// what: the owner's next change (which ends the halt: a halt belongs to
// its rollout) is held by a pause or a maintenance window. "" otherwise.
func fixWaits(in Input, d Decision) (reason, message string) {
	if d.Health == nil || d.Health.Phase != HealthHalted || d.Target == nil || in.Latest == nil || in.Hashes.Rollout == d.Target.RolloutHash {
		return "", ""
	}
	ends := fmt.Sprintf("; it ends the halted rollout of configuration %s", shortOf(d.Target, func(u *UserData) string { return u.RolloutWithoutVersion }))
	if d.Pause.Paused {
		return nodepoolv1.ReasonPaused, pendingWhilePaused(in, d) + ends
	}
	if h := d.Window.held(); h != nil {
		return nodepoolv1.ReasonOutsideMaintenanceWindow, "a rollout is pending: " + h.Message + ends
	}
	return "", ""
}

// pendingWhilePaused describes an owner change held back by pausedUntil.
func pendingWhilePaused(in Input, d Decision) string {
	if in.Latest == nil || d.Target == nil || d.Target.RolloutHash == in.Hashes.Rollout || !d.Pause.Paused {
		return ""
	}
	if d.Pause.Invalid {
		return "a rollout is pending; " + d.Pause.InvalidText() + ": it starts when the value is corrected or cleared"
	}
	if d.Pause.Until.IsZero() {
		return "a rollout is pending; the pool is paused (pausedUntil: \"true\") and it starts when the pause is lifted"
	}
	return "a rollout is pending; the pool is paused until " + d.Pause.Until.UTC().Format(time.RFC3339) + " and it starts then"
}

func planReached(in Input, d Decision, p *Plan) {
	c := metav1.Condition{Type: nodepoolv1.ConditionReachedIgnitionEndpoint, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonIgnitionNotReached, Message: "no machine has fetched its payload from the payload server yet"}
	for _, t := range in.Tokens {
		if t.FirstFetch != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, nodepoolv1.ReasonAsExpected, ""
			break
		}
	}
	if c.Status == metav1.ConditionFalse && d.Replicas == 0 {
		c.Status, c.Message = metav1.ConditionUnknown, "the pool has no machines"
	}
	p.Conditions = append(p.Conditions, c)
}

// NodeCounts counts the pool's Nodes by the payload label they carry; when
// the Nodes could not be read (NodesUnread), as the pool's status last
// said.
func NodeCounts(in Input) []nodepoolv1.NodePayloadCount {
	if in.NodesUnread {
		return slices.Clone(in.Pool.Status.Nodes)
	}
	counts := map[string]int32{}
	for _, n := range in.Nodes {
		counts[n.Payload]++
	}
	var out []nodepoolv1.NodePayloadCount
	for hash, n := range counts {
		out = append(out, nodepoolv1.NodePayloadCount{Payload: hash, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Payload < out[j].Payload })
	return out
}

// planNodes counts Nodes by the payload label they carry. Nodes that could
// not be read are as last known: a controller that starts before its
// connection to a workload cluster is up writes no status that says the
// pool has no nodes, and another when the connection is up.
func planNodes(in Input, p *Plan) {
	p.Nodes = NodeCounts(in)
	if in.NodesUnread {
		c := metav1.Condition{Type: nodepoolv1.ConditionAllNodesHealthy, Status: metav1.ConditionUnknown, Reason: nodepoolv1.ReasonReadFailed,
			Message: "the workload cluster's Nodes cannot be read yet"}
		if was := meta.FindStatusCondition(in.Pool.Status.Conditions, nodepoolv1.ConditionAllNodesHealthy); was != nil {
			c.Status, c.Reason, c.Message = was.Status, was.Reason, was.Message
		}
		p.Conditions = append(p.Conditions, c)
		return
	}
	healthy := true
	var sick []string
	for _, n := range in.Nodes {
		if !n.Ready {
			healthy = false
			sick = append(sick, n.Name)
		}
	}
	c := metav1.Condition{Type: nodepoolv1.ConditionAllNodesHealthy, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected, Message: fmt.Sprintf("%d nodes ready", len(in.Nodes))}
	if !healthy {
		sort.Strings(sick)
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, nodepoolv1.ReasonNodesUnhealthy, "not ready: "+strings.Join(sick, ", ")
	}
	p.Conditions = append(p.Conditions, c)
}

func planReady(in Input, d Decision, p *Plan) {
	want := d.Replicas
	md := in.MachineDeployment
	machines := metav1.Condition{Type: nodepoolv1.ConditionAllMachinesReady, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	ready := metav1.Condition{Type: nodepoolv1.ConditionReady, Status: metav1.ConditionTrue, Reason: nodepoolv1.ReasonAsExpected}
	switch {
	case md == nil:
		machines.Status, machines.Reason, machines.Message = metav1.ConditionFalse, nodepoolv1.ReasonMachinesNotReady, "the MachineDeployment does not exist yet"
	case md.ReadyReplicas < md.Replicas || md.Replicas < want:
		machines.Status, machines.Reason = metav1.ConditionFalse, nodepoolv1.ReasonMachinesNotReady
		machines.Message = notReadyMessage(md, want, d.Health)
	default:
		ready.Message = fmt.Sprintf("%d of %d machines ready", md.ReadyReplicas, want)
	}
	// AllMachinesReady says only what Ready does not: Ready counts the
	// machines; AllMachinesReady has a message only when not all are.
	if machines.Status != metav1.ConditionTrue {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, machines.Reason, machines.Message
	}
	p.Conditions = append(p.Conditions, machines, ready)
}

// notReadyMessage counts the ready machines of all there are (surge
// machines of a rollout included, so a machine that is not ready is never
// hidden by the pool's wanted count) and names the machines soaking under
// the health gate: the pool's readiness gate keeps them not Ready to
// Cluster API until their soak ends.
func notReadyMessage(md *MachineDeployment, want int32, h *HealthState) string {
	msg := fmt.Sprintf("%d of %d machines ready", md.ReadyReplicas, max(md.Replicas, want))
	if md.Replicas > want {
		msg += fmt.Sprintf(" (the pool wants %d)", want)
	}
	if h == nil || len(h.Soaking) == 0 || h.SoakEnds.IsZero() {
		return msg
	}
	ends := h.SoakEnds.UTC().Format(time.RFC3339)
	if len(h.Soaking) == 1 {
		return fmt.Sprintf("%s; %s soaks under the health gate until %s", msg, h.Soaking[0], ends)
	}
	return fmt.Sprintf("%s; %s soak under the health gate, the first until %s", msg, strings.Join(h.Soaking, ", "), ends)
}

func shortOf(u *UserData, f func(*UserData) string) string {
	if u == nil {
		return ""
	}
	return payload.Short(f(u))
}

func versionOf(u *UserData) string {
	if u == nil {
		return ""
	}
	return u.Version
}

// justCompleted is true on the first reconcile that sees a rollout done:
// the status still says updating, and every machine runs the target.
func justCompleted(in Input, running, target *UserData) bool {
	return onTarget(in.MachineDeployment, running, target) && in.Pool.Status.Updating != ""
}
