package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// outsideWindowsFlags are the emergency path's flags of `rollout restart`
// and `rollout apply-pending`.
type outsideWindowsFlags struct {
	outside bool
	reason  string
}

func addOutsideWindowsFlags(cmd *cobra.Command) *outsideWindowsFlags {
	f := &outsideWindowsFlags{}
	cmd.Flags().BoolVar(&f.outside, "outside-windows", false, "start now even outside the pool's maintenance windows and breakable exclusions (an emergency); needs --reason, which the rollout's history record and an event keep")
	cmd.Flags().StringVar(&f.reason, "reason", "", "why the rollout cannot wait for the maintenance window (with --outside-windows)")
	return f
}

// check refuses --outside-windows without a reason, and a reason without
// --outside-windows.
func (f *outsideWindowsFlags) check() error {
	f.reason = strings.TrimSpace(f.reason)
	switch {
	case f.outside && f.reason == "":
		return errors.New("--outside-windows needs --reason: say why the rollout cannot wait for the maintenance window (it is kept in the rollout's history)")
	case !f.outside && f.reason != "":
		return errors.New("--reason goes with --outside-windows")
	}
	return nil
}

// set marks the forced rollout at as an emergency on the pool.
func (f *outsideWindowsFlags) set(p *nodepoolv1.NodePool, at time.Time) {
	if !f.outside {
		return
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[nodepoolv1.AnnotationOutsideWindowsAt] = at.UTC().Format(time.RFC3339)
	p.Annotations[nodepoolv1.AnnotationOutsideWindowsReason] = f.reason
}

// windowPlan says in a plan when a rollout held by the maintenance
// windows rolls, and whether one fits its window.
func windowPlan(r *PlanResult, d rollout.Decision) {
	if d.Window == nil {
		return
	}
	r.Window = d.Window.Fit
	if h := d.WindowHeld(); h != nil {
		if until := h.Until(); !until.IsZero() {
			r.RollsAt = &until
		}
		r.WaitsFor = h.Message
	}
}

// windowStatus notes the next window, the drift deadline and what a
// rollout waits for on a pool's rollout status.
func windowStatus(st *RolloutStatus, d rollout.Decision) {
	if d.Window == nil {
		return
	}
	if g := d.Window.Platform; g.Found {
		start := g.Allowed.Start
		if g.Open {
			start = time.Time{}
		}
		st.NextWindow = timePtr(start)
	}
	if !d.Window.DriftDeadline.IsZero() {
		st.DriftDeadline = timePtr(d.Window.DriftDeadline)
	}
	if h := d.WindowHeld(); h != nil {
		st.heldByWindow = h.Message
		if until := h.Until(); !until.IsZero() {
			st.RollsAt = &until
		}
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// windowFleet fills a fleet row's next window and drift deadline from the
// pool's status.
func windowFleet(r *FleetRow, p *nodepoolv1.NodePool) {
	st := p.Status.Maintenance
	if p.Spec.Management.Maintenance == nil || st == nil {
		return
	}
	r.maintained = true
	if w := st.NextWindow; w != nil {
		r.NextWindow = timePtr(w.Start.Time)
		r.alwaysOpen = w.Start.IsZero()
	}
	if st.DriftDeadline != nil {
		r.DriftDeadline = timePtr(st.DriftDeadline.Time)
	}
}

// whenCell words a time for a table: "-" when unset, "open" for a window
// open now.
func whenCell(now time.Time, t *time.Time, open string) string {
	switch {
	case t == nil:
		return "-"
	case !t.After(now):
		return open
	}
	return t.UTC().Format(time.RFC3339) + " (in " + age(*t, now) + ")"
}

// withReasons reports whether a rollout of the history has a reason.
func withReasons(entries []history.Entry) bool {
	for _, e := range entries {
		if e.Reason != "" {
			return true
		}
	}
	return false
}

// withWindows reports whether a pool of the fleet has maintenance
// settings.
func withWindows(rows []FleetRow) bool {
	for _, r := range rows {
		if r.NextWindow != nil || r.DriftDeadline != nil || r.maintained {
			return true
		}
	}
	return false
}

// sayWhenItRolls words when the forced rollout requested for at (now, as
// poolmath.ForcedNow writes it, or a later time) rolls, from d: the engine's
// decision for the pool as it is after the request, made for the later of
// now and at. It rolls then (outside the windows on the emergency path),
// waits for a window or an exclusion, or replaces nothing. A pause is
// warnPaused's. Of a pool without maintenance settings that rolls, nothing
// is said.
func sayWhenItRolls(w io.Writer, pool *nodepoolv1.NodePool, d rollout.Decision, at, now time.Time, f *outsideWindowsFlags) {
	when := "now"
	if at.After(poolmath.ForcedNow(now)) { // poolmath.ForcedNow is "now", to the next second
		when = "at " + at.UTC().Format(time.RFC3339)
	}
	ref := poolRef(pool)
	emergency := " (use --outside-windows --reason for an emergency)"
	if f.outside {
		emergency = ""
	}
	switch {
	case d.Pause.Paused:
	case d.Action == rollout.ActionInvalid || d.Action == rollout.ActionHold:
		fmt.Fprintf(w, "Warning: %s rolls nothing while the controller holds the pool: %s\n", ref, d.Reason)
	case d.WindowHeld() != nil:
		h := d.WindowHeld()
		if until := h.Until(); h.Reason == nodepoolv1.ReasonOutsideMaintenanceWindow && !until.IsZero() {
			fmt.Fprintf(w, "Warning: %s rolls in its next maintenance window, at %s%s\n", ref, until.UTC().Format(time.RFC3339), emergency)
			return
		}
		fmt.Fprintf(w, "Warning: %s does not roll %s: %s%s\n", ref, when, h.Message, emergency)
	case d.Action == rollout.ActionForce || d.Action == rollout.ActionStart || d.Action == rollout.ActionCreate:
		if d.Window == nil {
			return
		}
		switch {
		case d.Action != rollout.ActionForce:
			fmt.Fprintf(w, "Note: %s rolls now: a change of its spec starts rolling (initiator %s) and replaces the machines\n", ref, d.Initiator)
		case d.Window.OutsideWindows != "":
			fmt.Fprintf(w, "Note: %s rolls %s, outside its maintenance windows (reason: %s)\n", ref, when, d.Window.OutsideWindows)
		case d.Window.Ungated && d.Initiator == rollout.InitiatorRestart:
			fmt.Fprintf(w, "Note: %s rolls %s: its maintenance windows do not gate a restart (spec.management.maintenance.gate does not list %s)\n", ref, when, nodepoolv1.GatedRolloutRestart)
		default:
			fmt.Fprintf(w, "Note: %s rolls %s: its maintenance window is open\n", ref, when)
		}
	case d.Forced == nil:
		fmt.Fprintf(w, "Note: %s: the request replaces no machine (none was created before %s, or a later forced rollout is already on the MachineDeployment)\n", ref, at.UTC().Format(time.RFC3339))
	}
}
