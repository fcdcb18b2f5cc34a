package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Phases of a pool's rollout, as `rollout status` reports them.
const (
	PhasePending    = "Pending"    // the controller has not seen the latest spec yet
	PhaseStarting   = "Starting"   // a forced rollout was requested and has not started yet
	PhaseRollingOut = "RollingOut" // machines are being replaced
	PhasePaused     = "Paused"     // a rollout is held by spec.management.pausedUntil
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
	// Note is extra information on a complete rollout, such as a forced
	// rollout scheduled later.
	Note string `json:"note,omitempty"`

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
(spec.management.pausedUntil holds the rollout), Scaling, Complete, Failed.

Exit status: 0 when the rollout is complete (or at once with --watch=false);
1 when it cannot proceed (invalid inputs, the controller does not act on the
pool); 2 when it stalled (no progress for --progress-deadline, or paused with
pausedUntil "true", which only a person ends); 3 after --timeout.`,
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
	for {
		c, pool, err := o.getPool(ctx, name)
		if err != nil {
			return err
		}
		st, err := o.currentStatus(ctx, c, pool)
		if err != nil {
			return err
		}
		if o.Output == "table" {
			if line := st.line(); line != lastLine {
				fmt.Fprintln(o.out(), line)
				lastLine = line
			}
		}
		finish := func(err error) error {
			if o.Output != "table" {
				if perr := o.printStructured(st); perr != nil {
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

// currentStatus reads where the pool's rollout stands from its status,
// conditions and MachineDeployment.
func (o *Options) currentStatus(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) (RolloutStatus, error) {
	st := RolloutStatus{
		Namespace: pool.Namespace, Pool: pool.Name,
		Replicas: pool.Status.Replicas, Ready: pool.Status.ReadyReplicas, UpToDate: pool.Status.UpdatedReplicas,
		Version: pool.Status.Version, Updating: pool.Status.Updating,
	}
	w, err := readWorkers(ctx, c, pool)
	if err != nil {
		return st, err
	}
	switch {
	case pool.Spec.Replicas != nil:
		st.Desired = *pool.Spec.Replicas
	case w != nil:
		st.Desired = w.replicas
	case pool.Spec.AutoScaling != nil:
		st.Desired = pool.Spec.AutoScaling.Min
	}
	cond := func(t string) *metav1.Condition { return meta.FindStatusCondition(pool.Status.Conditions, t) }
	isFalse := func(t string) (*metav1.Condition, bool) {
		c := cond(t)
		return c, c != nil && c.Status == metav1.ConditionFalse
	}
	updatingConfig, updatingVersion := cond(nodepoolv1.ConditionUpdatingConfig), cond(nodepoolv1.ConditionUpdatingVersion)
	paused := func(c *metav1.Condition) bool { return c != nil && c.Reason == nodepoolv1.ReasonPaused }
	st.idle = pool.Status.Updating == ""
	if c, f := isFalse(nodepoolv1.ConditionReconciliationActive); f && (c.Reason == nodepoolv1.ReasonUnsupported || c.Reason == nodepoolv1.ReasonNameConflict) {
		st.Phase, st.Message = PhaseFailed, c.Message
		return st, nil
	}
	if !pool.DeletionTimestamp.IsZero() {
		st.Phase, st.Message = PhaseFailed, "the pool is being deleted"
		return st, nil
	}
	if pool.Status.ObservedGeneration < pool.Generation {
		st.Phase = PhasePending
		st.Message = fmt.Sprintf("waiting for the controller to observe generation %d (it has seen %d)", pool.Generation, pool.Status.ObservedGeneration)
		return st, nil
	}
	for _, t := range []string{nodepoolv1.ConditionValidMachineConfig, nodepoolv1.ConditionValidGeneratedPayload} {
		if c, f := isFalse(t); f {
			st.Phase, st.Message = PhaseFailed, fmt.Sprintf("%s is False (%s): %s", t, c.Reason, c.Message)
			return st, nil
		}
	}
	switch {
	case paused(updatingConfig) || paused(updatingVersion):
		st.Phase = PhasePaused
		st.Message = updatingConfig.Message
		if paused(updatingVersion) && !paused(updatingConfig) {
			st.Message = updatingVersion.Message
		}
		st.pausedIndefinitely = pool.Spec.Management.PausedUntil == "true"
		return st, nil
	case pool.Status.Updating != "":
		st.Phase = PhaseRollingOut
		for _, c := range []*metav1.Condition{updatingConfig, updatingVersion} {
			if c != nil && c.Status == metav1.ConditionTrue {
				st.Message = c.Message
				break
			}
		}
		return st, nil
	}
	scheduled := updatingConfig != nil && updatingConfig.Reason == nodepoolv1.ReasonRolloutScheduled
	if f, ok := forcedNotStarted(pool, w, o.now()); ok {
		st.Phase = PhaseStarting
		st.Message = fmt.Sprintf("waiting for the controller to start the %s (requested at %s)", f.what, f.at.Format(time.RFC3339))
		return st, nil
	}
	if st.Replicas != st.Desired || st.Ready < st.Desired || st.UpToDate < st.Desired {
		st.Phase = PhaseScaling
		st.Message = fmt.Sprintf("waiting for %d machines up to date and ready", st.Desired)
		if c := cond(nodepoolv1.ConditionAllMachinesReady); c != nil && c.Status != metav1.ConditionTrue {
			st.Message += ": " + c.Message
		}
		return st, nil
	}
	st.Phase = PhaseComplete
	if scheduled {
		st.Note = updatingConfig.Message
	}
	return st, nil
}

// forcedNotStarted reports a forced rollout that is due, or due within
// the next seconds, and not yet on the MachineDeployment (the engine's own
// test for a forced rollout that was carried out: rollout.after at or
// after the request): an apply-pending request (an annotation, which does
// not change the generation) or a rolloutAfter. `rollout restart` and
// `apply-pending` write the next whole second, so what they just asked
// for shows as starting, not as scheduled. A paused pool reports Paused
// instead once the controller has seen the request. A request the
// controller had startGrace to act on and did not is done: it replaced
// nothing.
func forcedNotStarted(pool *nodepoolv1.NodePool, w *workers, now time.Time) (forcedRequest, bool) {
	if w == nil {
		return forcedRequest{}, false
	}
	if _, paused := rollout.PausedUntil(pool, now); paused {
		return forcedRequest{}, false
	}
	var reqs []forcedRequest
	if v := pool.Annotations[rollout.AnnotationApplyPending]; v != "" {
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			reqs = append(reqs, forcedRequest{at: at, what: "rollout that applies pending platform changes"})
		}
	}
	if ra := pool.Spec.Management.RolloutAfter; ra != nil && !ra.IsZero() {
		reqs = append(reqs, forcedRequest{at: ra.Time, what: "forced rollout (restart)"})
	}
	for _, f := range reqs {
		at := f.at.UTC().Truncate(time.Second)
		// Older requests the controller has had time to act on: one it
		// did not carry out replaced nothing (no machine was older).
		if at.After(now.Add(imminent)) || at.Before(now.Add(-startGrace)) {
			continue
		}
		if w.rolloutAfter == nil || w.rolloutAfter.Before(at) {
			return f, true
		}
	}
	return forcedRequest{}, false
}

// imminent is how soon a forced rollout must be due to count as asked for
// now: the next whole second, with room for clock skew; startGrace how long
// after its time the controller is given to start it.
const (
	imminent   = 2 * time.Second
	startGrace = 30 * time.Second
)

type forcedRequest struct {
	at   time.Time
	what string
}

// workers is what status needs of the object that owns a pool's machines:
// the MachineDeployment of a Replace pool, the MachineSet of an InPlace one.
type workers struct {
	replicas     int32
	rolloutAfter *time.Time
}

// readWorkers reads it; nil when it does not exist yet.
func readWorkers(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool) (*workers, error) {
	key := client.ObjectKeyFromObject(pool)
	if pool.Spec.Management.UpgradeType == nodepoolv1.UpgradeTypeInPlace {
		ms := &clusterv1.MachineSet{}
		if err := c.Get(ctx, key, ms); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("reading MachineSet %s: %w", key, err)
		}
		w := &workers{replicas: ptr.Deref(ms.Spec.Replicas, 0)}
		if t, err := time.Parse(time.RFC3339, ms.Annotations[nodepoolv1.AnnotationInPlaceRolloutAfter]); err == nil {
			w.rolloutAfter = &t
		}
		return w, nil
	}
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, key, md); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading MachineDeployment %s: %w", key, err)
	}
	w := &workers{replicas: ptr.Deref(md.Spec.Replicas, 0)}
	if !md.Spec.Rollout.After.IsZero() {
		w.rolloutAfter = &md.Spec.Rollout.After.Time
	}
	return w, nil
}

func (st RolloutStatus) progress() string {
	return fmt.Sprintf("%d of %d machines up to date, %d ready", st.UpToDate, st.Desired, st.Ready)
}

func (st RolloutStatus) line() string {
	switch st.Phase {
	case PhaseComplete:
		s := fmt.Sprintf("nodepool %q successfully rolled out: %d of %d machines up to date and ready, version %s", st.Pool, st.UpToDate, st.Desired, or(st.Version, "<none>"))
		if st.Note != "" {
			s += "; " + st.Note
		}
		return s
	case PhaseFailed:
		return fmt.Sprintf("nodepool %q rollout %s: %s", st.Pool, st.failedVerb(), st.Message)
	}
	return fmt.Sprintf("Waiting for nodepool %q rollout to finish: %s (%s: %s)...", st.Pool, st.progress(), st.Phase, st.Message)
}

func (st RolloutStatus) progressKey() string {
	return fmt.Sprintf("%s/%d/%d/%d/%d/%s", st.Phase, st.Replicas, st.Ready, st.UpToDate, st.Desired, st.Updating)
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
