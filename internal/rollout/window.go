package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// InitiatorDeadline is pending platform drift older than
// spec.management.maintenance.driftDeadline, applied at the next window.
const InitiatorDeadline Initiator = "deadline"

// WindowState is where the pool's maintenance settings stand, part of the
// Decision (nil when the pool has none).
type WindowState struct {
	// Platform is the gate of a platform rollout now: open or not, and the
	// interval it may start in (the window open now, or the next one): the
	// openings of all windows merged, the same at every look inside it.
	Platform poolmath.Gate
	// Hold is set when the decision's rollout waits for a window.
	Hold *WindowHold
	// OutsideWindows is the reason given for the forced rollout the
	// decision carries out on the emergency path ("" when none).
	OutsideWindows string
	// Ungated is true when the forced rollout that starts is of a class
	// the windows do not gate (a restart where
	// spec.management.maintenance.gate does not list Restart): it starts
	// whether a window is open or not.
	Ungated bool
	// DriftDeadline is when the oldest pending platform drift reaches
	// driftDeadline (zero: no deadline, or no drift); DeadlinePassed says
	// it has.
	DriftDeadline  time.Time
	DeadlinePassed bool
	// Fit says whether a rollout fits the window it starts in, from the
	// pool's recent rollout durations ("" when there are none).
	Fit string
	// Invalid is why the settings cannot be read ("" when they can).
	Invalid string
}

// WindowHold is a rollout the maintenance settings hold.
type WindowHold struct {
	Class     poolmath.Class
	Initiator Initiator
	// Gate is the held rollout's gate: when it may start.
	Gate poolmath.Gate
	// Reason is the MaintenanceWindow reason (OutsideMaintenanceWindow,
	// InMaintenanceExclusion, InvalidMaintenanceSettings); Message says
	// what waits and until when.
	Reason, Message string
}

// Until is when the held rollout may start (zero: unknown).
func (h *WindowHold) Until() time.Time {
	if h == nil || !h.Gate.Found {
		return time.Time{}
	}
	return h.Gate.Allowed.Start
}

// classOf is the class of rollout an initiator starts.
func classOf(i Initiator) poolmath.Class {
	switch i {
	case InitiatorSpec, InitiatorVersion:
		return poolmath.ClassOwner
	case InitiatorRestart:
		return poolmath.ClassRestart
	}
	return poolmath.ClassPlatform
}

// windowState reads the pool's maintenance settings at now (nil without
// any).
func windowState(in Input) (*poolmath.Calendar, *WindowState) {
	m := in.Pool.Spec.Management.Maintenance
	cal := poolmath.NewCalendar(m)
	if cal == nil {
		return nil, nil
	}
	ws := &WindowState{Platform: cal.GateAt(in.Now, poolmath.ClassPlatform, false)}
	if cal.Err != nil {
		ws.Invalid = cal.Err.Error()
	}
	return cal, ws
}

// setDeadline notes when the pending drift reaches the drift deadline.
func (ws *WindowState) setDeadline(in Input, pending []nodepoolv1.PendingManagementChange) {
	if ws == nil {
		return
	}
	if at, ok := driftDeadlineAt(in, pending); ok {
		ws.DriftDeadline, ws.DeadlinePassed = at, !at.After(in.Now)
	}
}

// driftDeadlineAt is when the oldest pending drift reaches the deadline.
func driftDeadlineAt(in Input, pending []nodepoolv1.PendingManagementChange) (time.Time, bool) {
	m := in.Pool.Spec.Management.Maintenance
	if m == nil || m.DriftDeadline == nil || len(pending) == 0 {
		return time.Time{}, false
	}
	oldest := pending[0].Since.Time
	for _, r := range pending[1:] {
		if r.Since.Before(&metav1.Time{Time: oldest}) {
			oldest = r.Since.Time
		}
	}
	return oldest.Add(m.DriftDeadline.Duration), true
}

// driftDeadlineRequest is the forced rollout the drift deadline asks for
// once it has passed: every machine created before the deadline, or
// before the opening of the window it is applied in (the one open now or
// the next) if that is later (so
// machines added meanwhile, which may boot the old pinned components, are
// replaced too). The request is the same at every look during a window.
func driftDeadlineRequest(in Input, pending []nodepoolv1.PendingManagementChange) (time.Time, bool) {
	at, ok := driftDeadlineAt(in, pending)
	if !ok || at.After(in.Now) {
		return time.Time{}, false
	}
	g := poolmath.NewCalendar(in.Pool.Spec.Management.Maintenance).GateAt(in.Now, poolmath.ClassPlatform, false)
	if g.Found && g.Allowed.Start.After(at) {
		at = g.Allowed.Start // the window it is applied in; holdForced shows it held until then
	}
	return at, true
}

// outsideWindows is the reason of the emergency path when it applies to
// the forced rollout at: the annotation's time is the request's and a
// reason is given. A request without a reason is not an emergency.
func outsideWindows(in Input, initiator Initiator, at time.Time) (reason string, asked bool) {
	if !initiator.Platform() && initiator != InitiatorRestart {
		return "", false
	}
	v := annotation(in.Pool, nodepoolv1.AnnotationOutsideWindowsAt)
	if v == "" {
		return "", false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || !poolmath.RequestTime(t).Equal(at) {
		return "", false
	}
	return annotation(in.Pool, nodepoolv1.AnnotationOutsideWindowsReason), true
}

// holdOwner holds an owner change the windows gate (gate: [Owner]) or an
// exclusion of scope All holds, outside the allowed time: the current
// target stays, as for a pause. A new pool, or a MachineDeployment made
// again, is never held.
func holdOwner(in Input, cal *poolmath.Calendar, ws *WindowState, o owner) owner {
	if cal == nil || !o.started || o.current == nil {
		return o
	}
	initiator := ownerInitiator(o.current, o.target)
	g := cal.GateAt(in.Now, poolmath.ClassOwner, false)
	if g.Open {
		return o
	}
	ws.Hold = newHold(in, poolmath.ClassOwner, initiator, g, "")
	o.target, o.started, o.deferred = o.current, false, true
	return o
}

// holdForced defers a due forced rollout the maintenance settings hold;
// the emergency path (outsideWindows) passes windows and breakable
// exclusions.
func holdForced(in Input, cal *poolmath.Calendar, ws *WindowState, f *Forced) {
	if cal == nil || f == nil {
		return
	}
	class := classOf(f.Initiator)
	if f.State == ForcedScheduled && f.Initiator == InitiatorDeadline {
		// Scheduled for the next window's opening: held by the window.
		f.State = ForcedDeferred
		if ws.Hold == nil {
			ws.Hold = newHold(in, class, f.Initiator, cal.GateAt(in.Now, class, false), "")
		}
		return
	}
	if f.State != ForcedStarts {
		return
	}
	reason, asked := outsideWindows(in, f.Initiator, f.At)
	emergency := asked && reason != ""
	g := cal.GateAt(in.Now, class, emergency)
	if g.Open {
		if emergency && !cal.GateAt(in.Now, class, false).Open {
			ws.OutsideWindows = reason
		}
		ws.Ungated = !cal.Gates(class)
		return
	}
	note := ""
	if asked && reason == "" {
		note = fmt.Sprintf("; %s is set without %s, so the request is not taken as an emergency", nodepoolv1.AnnotationOutsideWindowsAt, nodepoolv1.AnnotationOutsideWindowsReason)
	}
	f.State = ForcedDeferred
	if ws.Hold == nil {
		ws.Hold = newHold(in, class, f.Initiator, g, note)
	}
}

func newHold(in Input, class poolmath.Class, initiator Initiator, g poolmath.Gate, note string) *WindowHold {
	h := &WindowHold{Class: class, Initiator: initiator, Gate: g}
	what := fmt.Sprintf("a rollout (%s)", initiator)
	switch {
	case g.Invalid:
		h.Reason = nodepoolv1.ReasonInvalidMaintenanceSettings
		h.Message = what + " waits: the maintenance settings cannot be read, so nothing they gate starts until they are corrected"
	case g.Exclusion != "":
		h.Reason = nodepoolv1.ReasonInMaintenanceExclusion
		h.Message = fmt.Sprintf("%s waits: the maintenance exclusion %q holds it; %s", what, g.Exclusion, startsAt(g))
	default:
		h.Reason = nodepoolv1.ReasonOutsideMaintenanceWindow
		h.Message = fmt.Sprintf("%s waits for the next maintenance window: %s", what, startsAt(g))
	}
	h.Message += note
	return h
}

// startsAt says when a held rollout starts.
func startsAt(g poolmath.Gate) string {
	if !g.Found {
		return "no window opens within five years"
	}
	return "it starts at " + describeInterval(g.Allowed)
}

// describeInterval is "<start>" or "<start> (window until <end>)", in UTC.
func describeInterval(iv poolmath.Interval) string {
	s := iv.Start.UTC().Format(time.RFC3339)
	if iv.End.IsZero() {
		return s
	}
	return s + " (window until " + iv.End.UTC().Format(time.RFC3339) + ")"
}

// planWindow writes what the maintenance settings decided: the
// MaintenanceWindow condition and status.maintenance, the updating
// condition of a held rollout, the events, the reason on the record of a
// rollout that starts on the emergency path or at the drift deadline, and
// whether a rollout fits its window.
func planWindow(in Input, d Decision, p *Plan) {
	ws := d.Window
	if ws == nil {
		return
	}
	g := ws.Platform
	if ws.Hold != nil {
		g = ws.Hold.Gate
	}
	startsNow := d.Action == ActionCreate || d.Action == ActionStart || d.Action == ActionForce
	switch { // window_fit.go
	case startsNow && !g.Open:
		// It starts now, in no window (one the windows do not gate, or on
		// the emergency path): the next window's length says nothing of it.
	case g.Open && !g.Allowed.End.IsZero():
		ws.Fit = fitIn(in, d, g.Allowed.End.Sub(in.Now))
	case !g.Open && g.Found && !g.Allowed.End.IsZero():
		ws.Fit = fitIn(in, d, g.Allowed.End.Sub(g.Allowed.Start))
	}

	c := metav1.Condition{Type: nodepoolv1.ConditionMaintenanceWindow}
	switch {
	case ws.Invalid != "" && (ws.Hold == nil || ws.Hold.Gate.Invalid || g.Invalid):
		c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonInvalidMaintenanceSettings
		c.Message = ws.Invalid + "; the rollouts the windows gate are held until it is corrected, nothing running is disturbed"
	case g.Open:
		c.Status, c.Reason = metav1.ConditionTrue, nodepoolv1.ReasonInMaintenanceWindow
		c.Message = "no maintenance exclusion holds rollouts now"
		if !g.Allowed.End.IsZero() {
			c.Message = "rollouts may start until " + g.Allowed.End.UTC().Format(time.RFC3339)
		}
	case g.Exclusion != "":
		c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonInMaintenanceExclusion
		c.Message = fmt.Sprintf("the maintenance exclusion %q holds rollouts; next window: %s", g.Exclusion, nextOf(g))
	default:
		c.Status, c.Reason = metav1.ConditionFalse, nodepoolv1.ReasonOutsideMaintenanceWindow
		c.Message = "outside the maintenance windows; next window: " + nextOf(g)
	}
	if ws.Hold != nil {
		c.Message += "; waiting: " + ws.Hold.Message
	}
	if !ws.DriftDeadline.IsZero() {
		c.Message += "; pending platform drift reaches its deadline at " + ws.DriftDeadline.UTC().Format(time.RFC3339)
		if ws.DeadlinePassed {
			c.Message += " (passed: it is applied at the next window)"
		}
	}
	if ws.Fit != "" {
		c.Message += "; " + ws.Fit
	}
	p.Conditions = append(p.Conditions, c)

	st := &nodepoolv1.MaintenanceStatus{}
	if ws.Platform.Found {
		st.NextWindow = &nodepoolv1.WindowInterval{Start: metav1.NewTime(ws.Platform.Allowed.Start)}
		if !ws.Platform.Allowed.End.IsZero() {
			end := metav1.NewTime(ws.Platform.Allowed.End)
			st.NextWindow.End = &end
		}
	}
	if !ws.DriftDeadline.IsZero() {
		t := metav1.NewTime(ws.DriftDeadline)
		st.DriftDeadline = &t
	}
	if ws.Hold != nil {
		st.Waiting = ws.Hold.Message
	}
	p.Maintenance = st

	if h := ws.Hold; h != nil && !d.Pause.Paused {
		typ := nodepoolv1.ConditionUpdatingConfig
		if h.Initiator == InitiatorVersion {
			typ = nodepoolv1.ConditionUpdatingVersion
		}
		for i := range p.Conditions {
			if c := &p.Conditions[i]; c.Type == typ && c.Status != metav1.ConditionTrue {
				c.Reason, c.Message = h.Reason, h.Message
			}
		}
		if was := meta.FindStatusCondition(in.Pool.Status.Conditions, typ); was == nil || was.Message != h.Message {
			// Said once, when the hold starts or changes, not at every look.
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventRolloutDeferred, Message: h.Message})
		}
	}
	if d.Action == ActionForce && p.Record != nil {
		switch {
		case ws.OutsideWindows != "":
			p.Record.Reason = "outside maintenance windows: " + ws.OutsideWindows
			p.Events = append(p.Events, Event{Type: corev1.EventTypeWarning, Reason: nodepoolv1.EventRolloutOutsideMaintenanceWindow,
				Message: fmt.Sprintf("a forced rollout (%s) starts outside the maintenance windows: %s", d.Initiator, ws.OutsideWindows)})
		case d.Initiator == InitiatorDeadline:
			p.Record.Reason = "pending platform drift reached spec.management.maintenance.driftDeadline at " + ws.DriftDeadline.UTC().Format(time.RFC3339)
			p.Events = append(p.Events, Event{Type: corev1.EventTypeNormal, Reason: nodepoolv1.EventDriftDeadlineReached, Message: p.Record.Reason + ": it is applied now"})
		}
		if ws.Fit != "" {
			p.Record.Reason = joinReason(p.Record.Reason, ws.Fit)
		}
	}
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func nextOf(g poolmath.Gate) string {
	if !g.Found {
		return "none within five years"
	}
	return describeInterval(g.Allowed)
}

// considerWindow asks to look again when the window opens or closes, a
// held rollout may start, or the drift deadline passes.
func considerWindow(in Input, d Decision, consider func(time.Duration)) {
	ws := d.Window
	if ws == nil {
		return
	}
	for _, g := range []poolmath.Gate{ws.Platform, holdGate(ws.Hold)} {
		if !g.Found {
			continue
		}
		if !g.Allowed.Start.IsZero() { // zero: open for longer than the search looks back
			consider(g.Allowed.Start.Sub(in.Now))
		}
		if !g.Allowed.End.IsZero() {
			consider(g.Allowed.End.Sub(in.Now))
		}
	}
	if !ws.DriftDeadline.IsZero() {
		consider(ws.DriftDeadline.Sub(in.Now))
	}
}

func holdGate(h *WindowHold) poolmath.Gate {
	if h == nil {
		return poolmath.Gate{}
	}
	return h.Gate
}
