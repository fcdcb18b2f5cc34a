package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

func newRestartCommand(o *Options) *cobra.Command {
	var at string
	var outside *outsideWindowsFlags
	cmd := &cobra.Command{
		Use:   "restart POOL",
		Short: "Replace every machine of a pool, now or at a time",
		Long: `Force a rollout: set spec.management.rolloutAfter to now (or --at), so that
once that time has come every machine created before it is replaced, on the
latest payload, which also applies pending platform changes. The rollout is
recorded with initiator "restart". A paused pool starts it when the pause ends.

A pool whose spec.management.maintenance.gate lists Restart starts it in its next
maintenance window; --outside-windows --reason "..." starts it now (an
emergency: the reason is kept in the rollout's history and an event; an
unbreakable exclusion still holds it).`,
		Example: `  # Replace every machine of workers now.
  kubectl nodepool rollout restart workers

  # Replace them in tonight's maintenance window.
  kubectl nodepool rollout restart workers --at 2026-12-01T02:00:00Z

  # Replace them now, whatever the maintenance windows say.
  kubectl nodepool rollout restart workers --outside-windows --reason "kernel CVE-2026-1234"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outside.check(); err != nil {
				return err
			}
			when, what := poolmath.ForcedNow(o.now()), "restarted"
			if at != "" {
				t, err := timeFlag("at", at)
				if err != nil {
					return err
				}
				when = t
			}
			ctx := cmd.Context()
			c, pool, err := o.getPool(ctx, args[0])
			if err != nil {
				return err
			}
			if err := patchPool(ctx, c, pool, "spec.management.rolloutAfter", restartRequest(when, outside)); err != nil {
				return err
			}
			if at != "" && when.After(o.now()) {
				what = "restart scheduled"
			}
			o.warnWhen(ctx, c, pool, when, outside)
			return o.done(pool, "%s %s: every machine created before %s is replaced\n", poolRef(pool), what, when.Format(time.RFC3339))
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "when to replace the machines, an RFC3339 time (default: now)")
	outside = addOutsideWindowsFlags(cmd)
	return cmd
}

func newPauseCommand(o *Options) *cobra.Command {
	var until string
	cmd := &cobra.Command{
		Use:   "pause POOL",
		Short: "Hold every new rollout of a pool",
		Long: `Pause a NodePool: set spec.management.pausedUntil to "true" (until someone
resumes it) or to the --until time. While paused no rollout starts, neither an
owner change nor a forced one; a rollout already in progress continues, and
scaling still works. Held rollouts start by themselves when the pause ends; the
UpdatingConfig and UpdatingVersion conditions say what waits.`,
		Example: `  # Hold rollouts until resumed.
  kubectl nodepool rollout pause workers

  # Hold them over the weekend.
  kubectl nodepool rollout pause workers --until 2026-12-07T06:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := "true"
			if until != "" {
				t, err := timeFlag("until", until)
				if err != nil {
					return err
				}
				value = t.Format(time.RFC3339)
			}
			ctx := cmd.Context()
			c, pool, err := o.getPool(ctx, args[0])
			if err != nil {
				return err
			}
			if pool.Spec.Management.PausedUntil == value {
				return o.done(pool, "%s already paused%s\n", poolRef(pool), untilText(value))
			}
			if err := patchPool(ctx, c, pool, "spec.management.pausedUntil", func(p *nodepoolv1.NodePool) {
				p.Spec.Management.PausedUntil = value
			}); err != nil {
				return err
			}
			return o.done(pool, "%s paused%s\n", poolRef(pool), untilText(value))
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "an RFC3339 time at which the pause ends by itself (default: until resumed)")
	return cmd
}

func untilText(v string) string {
	if v == "true" {
		return ""
	}
	return " until " + v
}

func newResumeCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume POOL",
		Short: "End the pause or the health halt of a pool",
		Long: `Resume a paused NodePool: clear spec.management.pausedUntil. A rollout the
pause held (an owner change, a restart, apply-pending) starts now. It also
resumes the current rollout when the health gate or a drain halted it
(status.rollout.phase Halted): it asks the controller, with the annotation
` + nodepoolv1.AnnotationResume + `=<revision>, to end the halt of that rollout
(status.rollout.revision) and no other; the controller removes the request
once carried out. Delete the failed machine first, as a machine whose gate
failed halts the rollout again. Resuming a pool that is neither paused nor
halted changes nothing.`,
		Example: `  kubectl nodepool rollout resume workers`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, pool, err := o.getPool(ctx, args[0])
			if err != nil {
				return err
			}
			if len(rollout.Resume(pool.DeepCopy())) == 0 {
				return o.done(pool, "%s is neither paused nor halted\n", poolRef(pool))
			}
			var ended []string
			if err := patchPool(ctx, c, pool, "spec.management.pausedUntil", func(p *nodepoolv1.NodePool) {
				ended = rollout.Resume(p)
			}); err != nil {
				return err
			}
			if slices.Contains(ended, "health halt") || slices.Contains(ended, "drain halt") {
				rev := int64(0)
				if pool.Status.Rollout != nil {
					rev = pool.Status.Rollout.Revision
				}
				return o.done(pool, "%s resumed (%s): the controller ends the halt of revision %d and its rollout goes on\n", poolRef(pool), strings.Join(ended, ", "), rev)
			}
			return o.done(pool, "%s resumed\n", poolRef(pool))
		},
	}
}

func newApplyPendingCommand(o *Options) *cobra.Command {
	var force bool
	var outside *outsideWindowsFlags
	cmd := &cobra.Command{
		Use:   "apply-pending POOL",
		Short: "Roll the pool's nodes to apply pending platform changes",
		Long: `Apply pending platform (management) changes on the platform's behalf: set the
annotation ` + nodepoolv1.AnnotationApplyPending + ` to now, so that every machine
created before now is replaced once, on the latest payload. The rollout is
recorded with initiator "platform". A paused pool starts it when the pause ends.
A pool with maintenance windows (spec.management.maintenance) starts it in its
next window; --outside-windows --reason "..." starts it now (an emergency: the
reason is kept in the rollout's history and an event; an unbreakable exclusion
still holds it).

Pending changes are those of status.pendingManagementChanges (see
kubectl nodepool diff). With none pending, apply-pending refuses, since it would
replace every machine for nothing; --force does it anyway.`,
		Example: `  # Which platform changes wait? Then apply them.
  kubectl nodepool diff workers
  kubectl nodepool rollout apply-pending workers

  # A security fix that cannot wait for Saturday's window.
  kubectl nodepool rollout apply-pending workers --outside-windows --reason "CVE-2026-1234 in the API-server proxy"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outside.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, pool, err := o.getPool(ctx, args[0])
			if err != nil {
				return err
			}
			var pending []string
			for _, r := range pool.Status.PendingManagementChanges {
				pending = append(pending, r.Component)
			}
			if len(pending) == 0 && !force {
				return fmt.Errorf("%s has no pending platform changes (status.pendingManagementChanges is empty): nothing to apply; use kubectl nodepool rollout restart to replace every machine anyway, or --force", poolRef(pool))
			}
			forced := poolmath.ForcedNow(o.now())
			at := forced.Format(time.RFC3339)
			if err := patchPool(ctx, c, pool, "metadata.annotations["+nodepoolv1.AnnotationApplyPending+"]", applyPendingRequest(forced, outside)); err != nil {
				return err
			}
			what := "every machine created before " + at + " is replaced"
			if len(pending) > 0 {
				what = "applying " + strings.Join(pending, ", ") + ": " + what
			}
			o.warnWhen(ctx, c, pool, forced, outside)
			return o.done(pool, "%s apply-pending requested (initiator platform); %s\n", poolRef(pool), what)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace every machine even with no pending platform change")
	outside = addOutsideWindowsFlags(cmd)
	return cmd
}

// restartRequest is what `rollout restart` changes on the pool: every
// machine created before when is replaced.
func restartRequest(when time.Time, outside *outsideWindowsFlags) func(*nodepoolv1.NodePool) {
	return func(p *nodepoolv1.NodePool) {
		p.Spec.Management.RolloutAfter = &metav1.Time{Time: when}
		outside.set(p, when)
	}
}

// applyPendingRequest is what `rollout apply-pending` changes on the pool:
// the annotation at the request's time, by hand (recorded as platform, not
// for a fleet rollout).
func applyPendingRequest(at time.Time, outside *outsideWindowsFlags) func(*nodepoolv1.NodePool) {
	return func(p *nodepoolv1.NodePool) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[nodepoolv1.AnnotationApplyPending] = at.UTC().Format(time.RFC3339)
		delete(p.Annotations, nodepoolv1.AnnotationFleetRollout)
		outside.set(p, at)
	}
}

// patchAttempts bounds the re-reads of a pool whose patch conflicts.
const patchAttempts = 5

// patchPool applies change to the pool with a merge patch. A patch that
// removes or rewrites a request annotation (rollout.RequestAnnotations:
// a halt resume ends, a fleet rollout's request apply-pending replaces)
// holds the resourceVersion read: a newer value someone wrote since is
// never overwritten with one decided on the older pool. On a conflict the
// pool is read again and change applied to it.
func patchPool(ctx context.Context, c client.Client, pool *nodepoolv1.NodePool, field string, change func(*nodepoolv1.NodePool)) error {
	for attempt := 1; ; attempt++ {
		before := pool.DeepCopy()
		change(pool)
		patch := client.MergeFrom(before)
		if rollout.RewritesRequest(before, pool) {
			patch = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		}
		err := c.Patch(ctx, pool, patch)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == patchAttempts {
			return fmt.Errorf("setting %s on NodePool %s/%s: %w", field, pool.Namespace, pool.Name, err)
		}
		fresh := &nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), fresh); err != nil {
			return fmt.Errorf("reading NodePool %s/%s again after a conflict setting %s: %w", pool.Namespace, pool.Name, field, err)
		}
		*pool = *fresh
	}
}

// warnWhen says when the forced rollout just requested for at rolls: the
// engine's decision for the pool as it is with the request, made for the
// later of now and at, so what the CLI says is what the controller does.
func (o *Options) warnWhen(ctx context.Context, c client.Reader, pool *nodepoolv1.NodePool, at time.Time, f *outsideWindowsFlags) {
	now := o.now()
	t := now
	if at.After(now) {
		t = at
	}
	d, err := o.decideAt(ctx, c, c, pool, t)
	if err != nil {
		o.warnPaused(pool, poolmath.PauseAt(pool, t))
		fmt.Fprintf(o.ErrOut, "Warning: cannot tell when %s rolls: %v\n", poolRef(pool), err)
		return
	}
	o.warnPaused(pool, d.Plan.Decision.Pause)
	sayWhenItRolls(o.ErrOut, pool, d.Plan.Decision, at, now, f)
}

// warnPaused says when a forced rollout waits for a pause to end.
func (o *Options) warnPaused(pool *nodepoolv1.NodePool, pause poolmath.Pause) {
	switch {
	case !pause.Paused:
	case pause.Invalid:
		fmt.Fprintf(o.ErrOut, "Warning: %s is held as paused (%s): the rollout starts when it is corrected or resumed (kubectl nodepool rollout resume %s)\n", poolRef(pool), pause.InvalidText(), pool.Name)
	case pause.Indefinite():
		fmt.Fprintf(o.ErrOut, "Warning: %s is paused: the rollout starts when it is resumed (kubectl nodepool rollout resume %s)\n", poolRef(pool), pool.Name)
	default:
		fmt.Fprintf(o.ErrOut, "Warning: %s is paused until %s: the rollout starts then\n", poolRef(pool), pause.Until.UTC().Format(time.RFC3339))
	}
}

// done reports a change of the pool: the message, or with -o json or yaml
// the pool as it is now.
func (o *Options) done(pool *nodepoolv1.NodePool, format string, args ...any) error {
	if !o.tabular() {
		pool.ManagedFields = nil
		return o.printStructured(pool, poolObject(pool.Name))
	}
	_, err := fmt.Fprintf(o.out(), format, args...)
	return err
}

// timeFlag parses the value of a time flag: RFC3339, in UTC, to the second
// (the resolution of the API's times).
func timeFlag(name, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q is not an RFC3339 time such as 2026-12-01T02:00:00Z", name, value)
	}
	return t.UTC().Truncate(time.Second), nil
}
