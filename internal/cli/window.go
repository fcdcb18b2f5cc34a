package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
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

// warnWindow says when the rollout requested waits for a maintenance
// window (or, with --outside-windows, that it does not).
func (o *Options) warnWindow(pool *nodepoolv1.NodePool, f *outsideWindowsFlags) {
	st := pool.Status.Maintenance
	if pool.Spec.Management.Maintenance == nil || st == nil {
		return
	}
	if f.outside {
		fmt.Fprintf(o.ErrOut, "Note: %s rolls outside its maintenance windows (reason: %s); an unbreakable exclusion still holds it\n", poolRef(pool), f.reason)
		return
	}
	if w := st.NextWindow; w != nil && w.Start.After(o.now()) {
		fmt.Fprintf(o.ErrOut, "Warning: %s rolls in its next maintenance window, at %s (use --outside-windows --reason for an emergency)\n", poolRef(pool), w.Start.UTC().Format(time.RFC3339))
	}
}

// windowHeld is the hold of a rollout that waits for a maintenance window
// (nil when none, or when the pause holds it first).
func windowHeld(d rollout.Decision) *rollout.WindowHold {
	if d.Window == nil || d.Window.Hold == nil || d.Pause.Paused {
		return nil
	}
	return d.Window.Hold
}

// windowPlan says in a plan when a rollout held by the maintenance
// windows rolls, and whether one fits its window.
func windowPlan(r *PlanResult, d rollout.Decision) {
	if d.Window == nil {
		return
	}
	r.Window = d.Window.Fit
	if h := windowHeld(d); h != nil {
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
	if h := windowHeld(d); h != nil {
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
