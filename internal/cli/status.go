package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Phases of a pool's rollout, as `rollout status` reports them.
const (
	PhasePending    = "Pending"    // the controller has not seen the latest spec yet
	PhaseStarting   = "Starting"   // a forced rollout was requested and has not started yet
	PhaseRollingOut = "RollingOut" // machines are being replaced
	PhasePaused     = "Paused"     // a rollout is held by spec.management.pausedUntil, or the pool's Cluster is paused
	PhaseScaling    = "Scaling"    // no rollout, but not every machine is up and ready
	PhaseComplete   = "Complete"   // every machine runs the current rollout and is ready
	PhaseFailed     = "Failed"     // the rollout cannot proceed: the reason says why
)

// RolloutStatus is where a pool's rollout stands.
type RolloutStatus struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	Phase     string `json:"phase"`
	// Message says what the phase waits for or why it failed.
	Message  string `json:"message,omitempty"`
	Desired  int32  `json:"desired"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"ready"`
	UpToDate int32  `json:"upToDate"`
	Version  string `json:"version,omitempty"`
	Updating string `json:"updating,omitempty"`
	// Carries lists the platform components the rollout in progress also
	// applies (status.rollout.carriedDrift): drift that is not pending
	// while it rolls, and pending again, as old as it was, if it rolls back.
	Carries []string `json:"carries,omitempty"`
	// Revision is the current rollout, as the pool's history records it
	// (status_revision.go).
	Revision *StatusRevision `json:"revision,omitempty"`
	// Note is extra information on a complete rollout, such as a forced
	// rollout scheduled later.
	Note string `json:"note,omitempty"`
	// Published says the status is the pool's status as the controller
	// last published it, and what the user lacks to see the controller's
	// next step worked out now (access.go).
	Published string `json:"published,omitempty"`
	// NextWindow is when the pool's next maintenance window opens (unset
	// while one is open, or without maintenance settings), DriftDeadline
	// when pending platform drift reaches its deadline, and RollsAt when a
	// rollout the windows hold starts (window.go).
	NextWindow    *time.Time `json:"nextWindow,omitempty"`
	DriftDeadline *time.Time `json:"driftDeadline,omitempty"`
	RollsAt       *time.Time `json:"rollsAt,omitempty"`

	// heldByWindow says why a maintenance window holds the rollout.
	heldByWindow string
	// Health is the phase of a health-gated rollout: Canary, Soaking,
	// Rolling, Halted, RollingBack or RolledBack (status_health.go).
	Health string `json:"health,omitempty"`
	// Drains are the nodes being drained and what holds them
	// (status_drain.go).
	Drains []nodepoolv1.NodeDrainStatus `json:"drains,omitempty"`

	pausedIndefinitely bool
	// idle is true when no rollout was in progress.
	idle bool
}

func newStatusCommand(o *Options) *cobra.Command {
	var (
		watch            bool
		timeout          time.Duration
		progressDeadline time.Duration
		interval         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status POOL",
		Short: "Follow a pool's rollout until it completes",
		Long: `Follow the rollout of a NodePool until every machine runs the current rollout
and is ready, printing its progress (machines up to date of the desired count,
and the phase) each time it changes.

Phases: Pending (the controller has not seen the latest spec yet), Starting (a
forced rollout was requested and has not started yet), RollingOut, Paused
(spec.management.pausedUntil or a maintenance window holds the rollout, or
the pool's Cluster is paused — clusterctl move pauses it while it moves
the cluster — and the controller writes nothing to the pool),
Scaling, Complete, Failed. Each line names the current rollout's revision
in the pool's history (kubectl nodepool rollout history), and who started it:
"revision 7 (spec): ..."; with its outcome when it ended and another rollout
waits to start ("revision 7 (spec, Complete): ... (Paused: ...)").

Exit status: 0 when the rollout is complete (or at once with --watch=false);
1 when it cannot proceed (invalid inputs, the controller does not act on the
pool); 2 when it stalled (no progress for --progress-deadline, or paused with
pausedUntil "true", which only a person ends, or waiting for the pool's next
maintenance window, whose time it prints); 3 after --timeout.`,
		Example: `  # Wait for the rollout of workers to finish, at most 30 minutes.
  kubectl nodepool rollout status workers --timeout 30m

  # Print where the rollout stands and return at once.
  kubectl nodepool rollout status workers --watch=false -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.rolloutStatus(cmd.Context(), args[0], watch, timeout, progressDeadline, interval)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", true, "wait until the rollout completes; --watch=false prints the status once")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (exit status 3); 0 waits forever")
	cmd.Flags().DurationVar(&progressDeadline, "progress-deadline", 10*time.Minute, "report the rollout as stalled (exit status 2) when nothing changed for this long")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to look")
	_ = cmd.Flags().MarkHidden("interval")
	return cmd
}

func (o *Options) rolloutStatus(ctx context.Context, name string, watch bool, timeout, progressDeadline, interval time.Duration) error {
	start := o.now()
	lastChange, lastKey, lastLine := start, "", ""
	noted := false
	for {
		c, pool, err := o.getPool(ctx, name)
		if err != nil {
			return err
		}
		st, err := o.currentStatus(ctx, c, pool)
		if err != nil {
			return err
		}
		if st.Published != "" && !noted && o.ErrOut != nil {
			fmt.Fprintln(o.ErrOut, "Note: "+st.Published)
			noted = true
		}
		if o.tabular() {
			if line := st.line(); line != lastLine {
				fmt.Fprintln(o.out(), line)
				lastLine = line
			}
		}
		finish := func(err error) error {
			if !o.tabular() {
				if perr := o.printStructured(st, poolObject(pool.Name)); perr != nil {
					return perr
				}
			}
			return err
		}
		now := o.now()
		switch {
		case st.Phase == PhaseFailed:
			return finish(&ExitError{Code: ExitFailure, Err: fmt.Errorf("rollout of %s %s: %s", poolRef(pool), st.failedVerb(), st.Message)})
		case st.Phase == PhaseComplete || !watch:
			return finish(nil)
		case st.Phase == PhasePaused && st.heldByWindow != "":
			return finish(&ExitError{Code: ExitStalled, Err: fmt.Errorf("rollout of %s is held by its maintenance settings: %s", poolRef(pool), st.heldByWindow)})
		case st.pausedIndefinitely:
			return finish(&ExitError{Code: ExitStalled, Err: fmt.Errorf("rollout of %s is paused (spec.management.pausedUntil: \"true\"): run `kubectl nodepool rollout resume %s` to let it start", poolRef(pool), pool.Name)})
		}
		if key := st.progressKey(); key != lastKey {
			lastKey, lastChange = key, now
		}
		if st.Phase != PhasePaused && progressDeadline > 0 && now.Sub(lastChange) >= progressDeadline {
			return finish(&ExitError{Code: ExitStalled, Err: fmt.Errorf("rollout of %s stalled: no progress for %s (%s)", poolRef(pool), progressDeadline, st.stallHint(pool))})
		}
		if timeout > 0 && now.Sub(start) >= timeout {
			return finish(&ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for the rollout of %s: %s", timeout, poolRef(pool), st.progress())})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// currentStatus reads where the pool's rollout stands: from its status
// and conditions (what the controller did), and from the engine's decision
// on what exists now (what the controller does next), observed as the
// controller observes. The engine, not a copy of its rules, says whether a
// rollout is paused, about to start, or scheduled.
func (o *Options) currentStatus(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) (RolloutStatus, error) {
	missing, err := o.missingForPrediction(ctx, pool.Namespace)
	if err != nil {
		return RolloutStatus{Namespace: pool.Namespace, Pool: pool.Name}, err
	}
	if len(missing) > 0 {
		st := statusOf(pool, publishedPlan(pool), o.now())
		st.Revision = statusRevision(ctx, c, pool)
		st.Published = "shown as the controller last published it (status.rollout); working out its next step now needs " + missingWords(missing)
		return st, nil
	}
	dec, err := o.decide(ctx, c, c, pool)
	if err != nil {
		return RolloutStatus{Namespace: pool.Namespace, Pool: pool.Name}, err
	}
	st := statusOf(pool, dec.Plan, o.now())
	st.Revision = statusRevision(ctx, c, pool) // status_revision.go
	return st, nil
}

// statusOf is where the pool's rollout stands, given the engine's plan for
// it now.
func statusOf(pool *nodepoolv1.NodePool, plan rollout.Plan, now time.Time) RolloutStatus {
	st := RolloutStatus{
		Namespace: pool.Namespace, Pool: pool.Name,
		Replicas: pool.Status.Replicas, Ready: pool.Status.ReadyReplicas, UpToDate: pool.Status.UpdatedReplicas,
		Version: pool.Status.Version, Updating: pool.Status.Updating,
	}
	d := plan.Decision
	st.Desired = d.Replicas
	for _, r := range d.Standing.CarriedDrift {
		st.Carries = append(st.Carries, r.Component)
	}
	windowStatus(&st, d)
	cond := func(t string) *metav1.Condition { return meta.FindStatusCondition(pool.Status.Conditions, t) }
	isFalse := func(t string) (*metav1.Condition, bool) {
		c := cond(t)
		return c, c != nil && c.Status == metav1.ConditionFalse
	}
	st.idle = pool.Status.Updating == ""
	if c, f := isFalse(nodepoolv1.ConditionReconciliationActive); f && (c.Reason == nodepoolv1.ReasonUnsupported || c.Reason == nodepoolv1.ReasonNameConflict) {
		st.Phase, st.Message = PhaseFailed, c.Message
		return st
	}
	if c, f := isFalse(nodepoolv1.ConditionReconciliationActive); f && c.Reason == nodepoolv1.ReasonClusterPaused {
		// clusterctl move, or Cluster API's pause: the controller writes
		// nothing, so nothing the engine would do now happens.
		st.Phase, st.Message = PhasePaused, c.Message
		return st
	}
	if !pool.DeletionTimestamp.IsZero() {
		st.Phase, st.Message = PhaseFailed, "the pool is being deleted"
		return st
	}
	if pool.Status.ObservedGeneration < pool.Generation {
		st.Phase = PhasePending
		st.Message = fmt.Sprintf("waiting for the controller to observe generation %d (it has seen %d)", pool.Generation, pool.Status.ObservedGeneration)
		return st
	}
	phase, message := standing(pool, d.Standing)
	if phase == rollout.PhaseInvalid {
		st.Phase, st.Message = PhaseFailed, message
		return st
	}
	// A halt held by the change that ends it (waiting for a window or a
	// pause) is that wait, not the halt: the standing says which.
	if phase != rollout.PhaseHeld && (healthFailed(&st, pool, d) || drainFailed(&st, pool)) { // status_health.go, status_drain.go
		return st
	}
	switch {
	case phase == rollout.PhaseHeld && pausedOrWindowHeld(d.Standing):
		st.Phase, st.pausedIndefinitely = PhasePaused, d.Pause.Indefinite()
		st.Message = d.Standing.Message
		return st
	case pool.Status.Updating != "":
		st.Phase = PhaseRollingOut
		for _, t := range []string{nodepoolv1.ConditionUpdatingConfig, nodepoolv1.ConditionUpdatingVersion} {
			if c := cond(t); c != nil && c.Status == metav1.ConditionTrue {
				st.Message = c.Message
				break
			}
		}
		healthNote(&st, d, now)   // status_health.go
		drainNote(&st, pool, now) // status_drain.go
		return st
	case pausedOrWindowHeld(d.Standing):
		st.Phase, st.pausedIndefinitely = PhasePaused, d.Pause.Indefinite()
		st.Message = d.Standing.Hold.Message
		return st
	case startsNow(d, now):
		st.Phase = PhaseStarting
		st.Message = fmt.Sprintf("waiting for the controller to start the %s", describeDecision(d))
		return st
	}
	if !settled(pool, d.Standing) {
		st.Phase = PhaseScaling
		st.Message = fmt.Sprintf("waiting for %d machines up to date and ready", st.Desired)
		if c := cond(nodepoolv1.ConditionAllMachinesReady); c != nil && c.Status != metav1.ConditionTrue {
			st.Message += ": " + c.Message
		}
		return st
	}
	st.Phase = PhaseComplete
	if h := d.Standing.Hold; h != nil && h.By == rollout.HeldBySchedule {
		st.Note = h.Message
	}
	return st
}

// pausedOrWindowHeld reports a rollout the pause or a maintenance window
// holds (the engine's standing says which: a pause outranks a window).
func pausedOrWindowHeld(s rollout.Standing) bool {
	return s.Hold != nil && (s.Hold.By == rollout.HeldByPause || s.Hold.By == rollout.HeldByMaintenanceWindow)
}

// standing is the pool's phase and its message, as the controller
// published them (status.rollout), or as the engine says now for a pool
// whose status does not carry them yet.
func standing(pool *nodepoolv1.NodePool, now rollout.Standing) (rollout.Phase, string) {
	if r := pool.Status.Rollout; r != nil {
		return r.Phase, r.Message
	}
	return now.Phase, now.Message
}

// settled is whether the pool is settled: as the controller published it
// (status.rollout.settled) and as the engine says on what the command
// reads now. The controller publishes its standing last in a reconcile,
// after it started what it decided, so a rollout it just started can be
// read (its history record, the MachineDeployment replacing machines)
// before its status says so; and a pool whose status does not carry the
// standing yet has only the engine's.
func settled(pool *nodepoolv1.NodePool, now rollout.Standing) bool {
	if r := pool.Status.Rollout; r != nil && !r.Settled {
		return false
	}
	return now.Settled
}

// startsNow reports a rollout the engine starts now and the controller has
// not started yet: an owner change or a forced rollout due (`rollout
// restart` and `apply-pending` write the next whole second, so a forced
// rollout due within imminent counts too).
func startsNow(d rollout.Decision, now time.Time) bool {
	switch d.Action {
	case rollout.ActionStart, rollout.ActionForce:
		return true
	case rollout.ActionSchedule:
		return !d.At.After(now.Add(imminent))
	}
	return false
}

// imminent is how soon a scheduled forced rollout must be due to count as
// starting: the next whole second, with room for clock skew.
const imminent = 2 * time.Second

// describeDecision names the rollout a decision starts.
func describeDecision(d rollout.Decision) string {
	at := ""
	if !d.At.IsZero() {
		at = " (requested at " + d.At.UTC().Format(time.RFC3339) + ")"
	}
	if name := d.Initiator.FleetRollout(); name != "" {
		return "rollout that applies pending platform changes for fleet rollout " + name + at
	}
	switch d.Initiator {
	case rollout.InitiatorPlatform:
		return "rollout that applies pending platform changes" + at
	case rollout.InitiatorRestart:
		return "forced rollout (restart)" + at
	case rollout.InitiatorPolicy:
		return "rollout that applies pending platform changes (managementUpdates: Rollout)" + at
	case rollout.InitiatorVersion:
		return "rollout of version change"
	}
	return "rollout of the spec change"
}

// heldMessage is what the engine says holds the decision's rollout: the
// pause, a maintenance window or its schedule ("" when none of them
// does).
func heldMessage(d rollout.Decision) string {
	if h := d.Standing.Hold; h != nil && (pausedOrWindowHeld(d.Standing) || h.By == rollout.HeldBySchedule) {
		return h.Message
	}
	return ""
}

func (st RolloutStatus) progress() string {
	return fmt.Sprintf("%d of %d machines up to date, %d ready", st.UpToDate, st.Desired, st.Ready)
}

func (st RolloutStatus) line() string {
	rev := st.revisionWords() // status_revision.go
	switch st.Phase {
	case PhaseComplete:
		if rev != "" {
			rev += ", "
		}
		s := fmt.Sprintf("nodepool %q successfully rolled out: %s%d of %d machines up to date and ready, version %s", st.Pool, rev, st.UpToDate, st.Desired, or(st.Version, "<none>"))
		if st.Note != "" {
			s += "; " + st.Note
		}
		if st.NextWindow != nil {
			s += "; next maintenance window at " + st.NextWindow.Format(time.RFC3339)
		}
		return s
	}
	if rev != "" {
		rev += ": "
	}
	if st.Phase == PhaseFailed {
		return fmt.Sprintf("nodepool %q rollout %s: %s%s", st.Pool, st.failedVerb(), rev, st.Message)
	}
	carries := ""
	if len(st.Carries) > 0 {
		carries = "; it also applies platform changes: " + strings.Join(st.Carries, ", ")
	}
	return fmt.Sprintf("Waiting for nodepool %q rollout to finish: %s%s (%s: %s%s)...", st.Pool, rev, st.progress(), st.Phase, st.Message, carries)
}

func (st RolloutStatus) progressKey() string {
	rev := int64(0)
	if st.Revision != nil {
		rev = st.Revision.Revision
	}
	return fmt.Sprintf("%s/%d/%d/%d/%d/%s/%d", st.Phase, st.Replicas, st.Ready, st.UpToDate, st.Desired, st.Updating, rev)
}

func (st RolloutStatus) stallHint(pool *nodepoolv1.NodePool) string {
	for _, t := range []string{nodepoolv1.ConditionAllMachinesReady, nodepoolv1.ConditionReconciliationActive, nodepoolv1.ConditionAllNodesHealthy} {
		if c := meta.FindStatusCondition(pool.Status.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("%s: %s", t, c.Message)
		}
	}
	return st.progress()
}

// failedVerb says "failed" for a rollout that was in progress, and "cannot
// start" when nothing was rolling (a bad input holds the next one).
func (st *RolloutStatus) failedVerb() string {
	if st.idle {
		return "cannot start"
	}
	return "failed"
}
