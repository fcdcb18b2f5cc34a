package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// fleetRolloutFlags are the flags of `fleet rollout NAME`.
type fleetRolloutFlags struct {
	selector, namespaceSelector string
	waves                       string
	soak                        time.Duration
	maxConcurrent               int32
	action, heldPools           string
	maxUnhealthy                int32
	continueOnFailure           bool
	paused, dryRun              bool
}

func newFleetRolloutCommand(o *Options) *cobra.Command {
	var f fleetRolloutFlags
	cmd := &cobra.Command{
		Use:   "rollout NAME",
		Short: "Roll a platform update across many pools in waves (a FleetRollout)",
		Long: `Create a FleetRollout: apply pending platform changes (--action apply-pending,
the default) or replace every machine (--action restart) across the pools that
--selector (pool labels) and --namespace-selector (namespace labels) select, in
waves: cumulative counts or percentages of the selected pools (--waves
1,10%,100% rolls one pool, then up to a tenth, then the rest). A wave starts
once the previous one completed and --soak passed; at most --max-concurrent
pools roll at once. The selection is fixed at the start: each selected pool
keeps its wave and state in its annotation fleetrollout.nodepool.dev/NAME.

The rollout halts when a pool it triggered reports RolloutHealthy False (its
health gate stopped or rolled back the rollout), unless --continue-on-failure,
or when more than --max-unhealthy-pools are unhealthy. A pool paused, outside
its maintenance window or in an exclusion is waited for (--held-pools wait) or
skipped (--held-pools skip). Each pool's rollout is recorded in its history with
the initiator fleetrollout/NAME.

Follow it with kubectl nodepool fleet rollout status NAME; hold it with pause,
continue with resume (also after a halt), end it with cancel.`,
		Example: `  # One pool, then a tenth, then the rest, 30 minutes apart, 5 at a time.
  kubectl nodepool fleet rollout proxy-fix --selector tier=prod --waves 1,10%,100% --soak 30m --max-concurrent 5

  # Restart every pool of the namespaces labelled env=staging at once.
  kubectl nodepool fleet rollout staging-restart --namespace-selector env=staging --waves 100% --action restart`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fr, err := f.fleetRollout(args[0])
			if err != nil {
				return err
			}
			c, err := o.kubeClient()
			if err != nil {
				return err
			}
			var opts []client.CreateOption
			if f.dryRun {
				opts = append(opts, client.DryRunAll)
			}
			if err := c.Create(cmd.Context(), fr, opts...); err != nil {
				return fmt.Errorf("creating FleetRollout %s: %w", fr.Name, err)
			}
			if !o.tabular() {
				fr.ManagedFields = nil
				return o.printStructured(fr, fleetRolloutObject(fr.Name))
			}
			what := "created"
			if f.dryRun {
				what = "valid (dry run, not created)"
			}
			_, err = fmt.Fprintf(o.out(), "fleetrollout %s %s: %s in waves %s; follow it with kubectl nodepool fleet rollout status %s\n",
				fr.Name, what, fr.Spec.Action, f.waves, fr.Name)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.selector, "selector", "l", "", "pool label selector, such as tier=prod (default: every pool)")
	fl.StringVar(&f.namespaceSelector, "namespace-selector", "", "namespace label selector, such as env=prod (default: every namespace)")
	fl.StringVar(&f.waves, "waves", "1,10%,100%", "cumulative wave sizes: counts or percentages of the selected pools")
	fl.DurationVar(&f.soak, "soak", 0, "how long to wait after a wave completes before the next one starts")
	fl.Int32Var(&f.maxConcurrent, "max-concurrent", 0, "how many pools roll at once (0: a whole wave)")
	fl.StringVar(&f.action, "action", "apply-pending", "apply-pending (pools without pending drift are skipped) or restart")
	fl.StringVar(&f.heldPools, "held-pools", "wait", "pools paused or outside their maintenance window: wait or skip")
	fl.Int32Var(&f.maxUnhealthy, "max-unhealthy-pools", -1, "halt when more than this many triggered pools are unhealthy (-1: no limit)")
	fl.BoolVar(&f.continueOnFailure, "continue-on-failure", false, "do not halt when a pool's rollout reports RolloutHealthy False")
	fl.BoolVar(&f.paused, "paused", false, "create it paused (select the pools, trigger none until resumed)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "validate with the API server without creating it")
	cmd.AddCommand(newFleetRolloutStatusCommand(o), newFleetRolloutPauseCommand(o), newFleetRolloutResumeCommand(o), newFleetRolloutCancelCommand(o))
	return cmd
}

// fleetRollout builds the FleetRollout the flags describe.
func (f fleetRolloutFlags) fleetRollout(name string) (*nodepoolv1.FleetRollout, error) {
	fr := &nodepoolv1.FleetRollout{ObjectMeta: metav1.ObjectMeta{Name: name}}
	var err error
	if fr.Spec.PoolSelector, err = selectorFlag("selector", f.selector); err != nil {
		return nil, err
	}
	if fr.Spec.NamespaceSelector, err = selectorFlag("namespace-selector", f.namespaceSelector); err != nil {
		return nil, err
	}
	if fr.Spec.Waves, err = wavesFlag(f.waves); err != nil {
		return nil, err
	}
	switch f.action {
	case "apply-pending":
		fr.Spec.Action = nodepoolv1.FleetActionApplyPending
	case "restart":
		fr.Spec.Action = nodepoolv1.FleetActionRestart
	default:
		return nil, fmt.Errorf("--action %q: use apply-pending or restart", f.action)
	}
	switch f.heldPools {
	case "wait":
		fr.Spec.HeldPools = nodepoolv1.HeldPoolWait
	case "skip":
		fr.Spec.HeldPools = nodepoolv1.HeldPoolSkip
	default:
		return nil, fmt.Errorf("--held-pools %q: use wait or skip", f.heldPools)
	}
	if f.soak > 0 {
		fr.Spec.Soak = &metav1.Duration{Duration: f.soak}
	}
	if f.maxConcurrent > 0 {
		fr.Spec.MaxConcurrent = ptr.To(f.maxConcurrent)
	}
	if f.maxUnhealthy >= 0 {
		fr.Spec.StopOn.MaxUnhealthyPools = ptr.To(f.maxUnhealthy)
	}
	fr.Spec.StopOn.RolloutUnhealthy = ptr.To(!f.continueOnFailure)
	fr.Spec.Paused = f.paused
	return fr, nil
}

func selectorFlag(name, v string) (*metav1.LabelSelector, error) {
	if v == "" {
		return nil, nil
	}
	s, err := metav1.ParseToLabelSelector(v)
	if err != nil {
		return nil, fmt.Errorf("--%s %q is not a label selector such as tier=prod,region in (eu,us): %w", name, v, err)
	}
	return s, nil
}

// wavesFlag parses --waves: comma-separated counts or percentages.
func wavesFlag(v string) ([]intstr.IntOrString, error) {
	var out []intstr.IntOrString
	for _, w := range strings.Split(v, ",") {
		w = strings.TrimSpace(w)
		if n, err := strconv.Atoi(w); err == nil {
			out = append(out, intstr.FromInt32(int32(n)))
			continue
		}
		if !strings.HasSuffix(w, "%") {
			return nil, fmt.Errorf("--waves %q: every wave is a count or a percentage, such as 1,10%%,100%%", v)
		}
		out = append(out, intstr.FromString(w))
	}
	return out, nil
}

func (o *Options) getFleetRollout(ctx context.Context, name string) (client.Client, *nodepoolv1.FleetRollout, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, nil, err
	}
	fr := &nodepoolv1.FleetRollout{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, fr); err != nil {
		return nil, nil, fmt.Errorf("reading FleetRollout %s: %w", name, err)
	}
	return c, fr, nil
}

// patchFleetRollout applies change with a merge patch and reports it.
func (o *Options) patchFleetRollout(ctx context.Context, name, field string, change func(*nodepoolv1.FleetRollout) (string, bool)) error {
	c, fr, err := o.getFleetRollout(ctx, name)
	if err != nil {
		return err
	}
	before := fr.DeepCopy()
	msg, write := change(fr)
	if write {
		if err := c.Patch(ctx, fr, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("setting %s on FleetRollout %s: %w", field, name, err)
		}
	}
	if !o.tabular() {
		fr.ManagedFields = nil
		return o.printStructured(fr, fleetRolloutObject(fr.Name))
	}
	_, err = fmt.Fprintf(o.out(), "fleetrollout %s %s\n", name, msg)
	return err
}

func newFleetRolloutPauseCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "pause NAME",
		Short: "Stop triggering pools (pools rolling finish)",
		Long: `Pause a FleetRollout: set spec.paused. No further pool is triggered; pools
rolling already finish. kubectl nodepool fleet rollout resume continues.`,
		Example: `  kubectl nodepool fleet rollout pause proxy-fix`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.patchFleetRollout(cmd.Context(), args[0], "spec.paused", func(fr *nodepoolv1.FleetRollout) (string, bool) {
				if fr.Spec.Paused {
					return "already paused", false
				}
				fr.Spec.Paused = true
				return "paused", true
			})
		},
	}
}

func newFleetRolloutResumeCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Continue a paused or halted fleet rollout",
		Long: `Resume a FleetRollout: clear spec.paused and set spec.resumedAt to now, which
clears a halt recorded before it (status.haltedAt). If a stop condition still
holds (a pool's rollout still unhealthy), the rollout halts again at once.`,
		Example: `  # After fixing the pool that halted it:
  kubectl nodepool fleet rollout resume proxy-fix`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := metav1.NewTime(poolmath.ForcedNow(o.now()))
			return o.patchFleetRollout(cmd.Context(), args[0], "spec.resumedAt", func(fr *nodepoolv1.FleetRollout) (string, bool) {
				if fr.Spec.Cancelled {
					return "is cancelled: nothing to resume", false
				}
				fr.Spec.Paused, fr.Spec.ResumedAt = false, &now
				return "resumed", true
			})
		},
	}
}

func newFleetRolloutCancelCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel NAME",
		Short: "End a fleet rollout for good",
		Long: `Cancel a FleetRollout: set spec.cancelled. No further pool is triggered, and a
pool triggered whose rollout has not started (held by its window) is released;
pools rolling finish their rollout. A cancel cannot be undone.`,
		Example: `  kubectl nodepool fleet rollout cancel proxy-fix`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.patchFleetRollout(cmd.Context(), args[0], "spec.cancelled", func(fr *nodepoolv1.FleetRollout) (string, bool) {
				if fr.Spec.Cancelled {
					return "already cancelled", false
				}
				fr.Spec.Cancelled = true
				return "cancelled", true
			})
		},
	}
}
