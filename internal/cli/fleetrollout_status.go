package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
)

// FleetRolloutReport is where a fleet rollout stands (`fleet rollout
// status -o json`).
type FleetRolloutReport struct {
	Name        string                        `json:"name"`
	Action      string                        `json:"action"`
	Phase       string                        `json:"phase"`
	Message     string                        `json:"message,omitempty"`
	CurrentWave int32                         `json:"currentWave"`
	Waves       []nodepoolv1.FleetRolloutWave `json:"waves"`
	// Failed, TakenOver and Waiting are the pools failed, taken over by a
	// person's later request, and waiting, with why.
	Failed    []nodepoolv1.FleetRolloutPool `json:"failed,omitempty"`
	TakenOver []nodepoolv1.FleetRolloutPool `json:"takenOver,omitempty"`
	Waiting   []nodepoolv1.FleetRolloutPool `json:"waiting,omitempty"`
	// Pools is every selected pool with its state now, computed from what
	// each pool keeps and reports (the FleetRollout's status holds counts
	// only, and the pools that need a person up to a cap).
	Pools []nodepoolv1.FleetRolloutPool `json:"pools"`
}

func reportOf(fr *nodepoolv1.FleetRollout, pools []nodepoolv1.FleetRolloutPool) FleetRolloutReport {
	r := FleetRolloutReport{Name: fr.Name, Action: string(fr.Spec.Action), Phase: string(fr.Status.Phase), Message: fr.Status.Message,
		CurrentWave: fr.Status.CurrentWave, Waves: fr.Status.Waves, Pools: pools}
	if r.Phase == "" {
		r.Phase, r.Message = "Pending", "waiting for the controller to select the pools"
	}
	if r.Waves == nil {
		r.Waves = []nodepoolv1.FleetRolloutWave{}
	}
	if r.Pools == nil {
		r.Pools = []nodepoolv1.FleetRolloutPool{}
	}
	for _, p := range pools {
		switch p.State {
		case nodepoolv1.FleetPoolFailed:
			r.Failed = append(r.Failed, p)
		case nodepoolv1.FleetPoolTakenOver:
			r.TakenOver = append(r.TakenOver, p)
		case nodepoolv1.FleetPoolWaiting:
			if p.Message != "" {
				r.Waiting = append(r.Waiting, p)
			}
		}
	}
	return r
}

// fleetRolloutPools is every member of the fleet rollout with its state
// now: the pools' kept state (their annotation
// FleetRolloutPoolAnnotation(name)) and what they report, through the
// fleet decision's own view (internal/fleet View).
func (o *Options) fleetRolloutPools(ctx context.Context, c client.Client, fr *nodepoolv1.FleetRollout) ([]nodepoolv1.FleetRolloutPool, error) {
	list := &nodepoolv1.NodePoolList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodePools (every namespace) for fleet rollout %s's pools: %w", fr.Name, err)
	}
	pools, errs := fleet.PoolsOf(fr, list.Items, o.now())
	for _, err := range errs {
		fmt.Fprintf(o.ErrOut, "Warning: %v\n", err)
	}
	return pools, nil
}

// line is the one-line progress `fleet rollout status` prints on change.
func (r FleetRolloutReport) line() string {
	var done, total, rolling, waiting, skipped, failed int32
	for _, w := range r.Waves {
		total += w.Pools
		done += w.Done
		rolling += w.Rolling + w.TakenOver
		waiting += w.Waiting
		skipped += w.Skipped
		failed += w.Failed
	}
	s := fmt.Sprintf("fleetrollout %q %s, wave %d of %d: %d of %d pools done, %d rolling, %d waiting, %d skipped, %d failed",
		r.Name, r.Phase, r.CurrentWave, len(r.Waves), done, total, rolling, waiting, skipped, failed)
	if r.Message != "" {
		s += " (" + r.Message + ")"
	}
	return s
}

func (r FleetRolloutReport) table() *table {
	t := &table{header: []string{"WAVE", "POOLS", "DONE", "ROLLING", "WAITING", "PENDING", "SKIPPED", "FAILED", "STARTED", "COMPLETED"}}
	ts := func(v interface{ IsZero() bool }, s func() string) string {
		if v == nil || v.IsZero() {
			return "-"
		}
		return s()
	}
	for _, w := range r.Waves {
		started := ts(w.StartedAt, func() string { return w.StartedAt.UTC().Format(time.RFC3339) })
		completed := ts(w.CompletedAt, func() string { return w.CompletedAt.UTC().Format(time.RFC3339) })
		t.add(fmt.Sprint(w.Wave), fmt.Sprint(w.Pools), fmt.Sprint(w.Done), fmt.Sprint(w.Rolling), fmt.Sprint(w.Waiting),
			fmt.Sprint(w.Pending), fmt.Sprint(w.Skipped), fmt.Sprint(w.Failed), started, completed)
	}
	return t
}

func newFleetRolloutStatusCommand(o *Options) *cobra.Command {
	var (
		watch    bool
		timeout  time.Duration
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Follow a fleet rollout until it completes",
		Long: `Follow a FleetRollout, printing a line each time its progress changes: the
phase, the current wave, and the pools done, rolling, waiting, skipped and
failed. At the end (or at once with --watch=false) it prints the waves and
every pool (failed, taken over and waiting ones first) with its state and why,
computed from what each pool keeps and reports.

Exit status: 0 when the rollout is complete (or at once with --watch=false);
1 when it halted (a pool's rollout failed; the message names it) or was
cancelled; 2 when it is paused, which only a person ends (kubectl nodepool
fleet rollout resume); 3 after --timeout.`,
		Example: `  kubectl nodepool fleet rollout status proxy-fix --timeout 4h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.fleetRolloutStatus(cmd.Context(), args[0], watch, timeout, interval)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", true, "wait until the rollout completes; --watch=false prints the status once")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (exit status 3); 0 waits forever")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to look")
	_ = cmd.Flags().MarkHidden("interval")
	return cmd
}

func (o *Options) fleetRolloutStatus(ctx context.Context, name string, watch bool, timeout, interval time.Duration) error {
	start, last := o.now(), ""
	for {
		c, fr, err := o.getFleetRollout(ctx, name)
		if err != nil {
			return err
		}
		r := reportOf(fr, nil)
		if o.tabular() {
			if l := r.line(); l != last {
				fmt.Fprintln(o.out(), l)
				last = l
			}
		}
		finish := func(err error) error {
			pools, perr := o.fleetRolloutPools(ctx, c, fr)
			if perr != nil {
				return perr
			}
			r = reportOf(fr, pools)
			if !o.tabular() {
				if perr := o.printStructured(r, fleetRolloutObject(fr.Name)); perr != nil {
					return perr
				}
				return err
			}
			if perr := r.table().print(o.out()); perr != nil {
				return perr
			}
			fmt.Fprintln(o.out())
			if perr := poolsTable(r.Pools).print(o.out()); perr != nil {
				return perr
			}
			return err
		}
		switch nodepoolv1.FleetRolloutPhase(r.Phase) {
		case nodepoolv1.FleetPhaseComplete:
			return finish(nil)
		case nodepoolv1.FleetPhaseHalted:
			return finish(&ExitError{Code: ExitFailure, Err: fmt.Errorf("fleet rollout %s %s", name, r.Message)})
		case nodepoolv1.FleetPhaseCancelled:
			return finish(&ExitError{Code: ExitFailure, Err: fmt.Errorf("fleet rollout %s was cancelled", name)})
		}
		if !watch {
			return finish(nil)
		}
		if r.Phase == string(nodepoolv1.FleetPhasePaused) {
			return finish(&ExitError{Code: ExitStalled, Err: fmt.Errorf("fleet rollout %s is paused: run `kubectl nodepool fleet rollout resume %s` to continue", name, name)})
		}
		if timeout > 0 && o.now().Sub(start) >= timeout {
			return finish(&ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for fleet rollout %s: %s", timeout, name, r.Message)})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// poolsTable lists every pool of a fleet rollout: failed, taken over and
// waiting ones first (they may need a person), then in wave order.
func poolsTable(pools []nodepoolv1.FleetRolloutPool) *table {
	rank := func(s nodepoolv1.FleetPoolState) int {
		switch s {
		case nodepoolv1.FleetPoolFailed:
			return 0
		case nodepoolv1.FleetPoolTakenOver:
			return 1
		case nodepoolv1.FleetPoolWaiting:
			return 2
		}
		return 3
	}
	sorted := append([]nodepoolv1.FleetRolloutPool(nil), pools...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if a, b := rank(sorted[i].State), rank(sorted[j].State); a != b {
			return a < b
		}
		return sorted[i].Wave < sorted[j].Wave
	})
	t := &table{header: []string{"NAMESPACE", "POOL", "WAVE", "STATE", "TRIGGERED", "REVISION", "MESSAGE"}}
	for _, p := range sorted {
		triggered, rev := "-", "-"
		if p.TriggeredAt != nil {
			triggered = p.TriggeredAt.UTC().Format(time.RFC3339)
		}
		if p.Revision > 0 {
			rev = fmt.Sprint(p.Revision)
		}
		t.add(p.Namespace, p.Name, fmt.Sprint(p.Wave), string(p.State), triggered, rev, p.Message)
	}
	return t
}

// fleetMembership names, for each pool, the fleet rollout it belongs to:
// from the pools' kept state (their annotations
// fleetrollout.nodepool.dev/<name>; one in progress first, else the
// newest), "" for a pool in none. A user who may not list FleetRollouts
// still sees the membership, without telling which is in progress.
func fleetMembership(ctx context.Context, c client.Client, pools []nodepoolv1.NodePool) map[string]string {
	type pick struct {
		desc    string
		running bool
		started time.Time
	}
	rollouts := map[string]nodepoolv1.FleetRollout{}
	list := &nodepoolv1.FleetRolloutList{}
	if err := c.List(ctx, list); err == nil {
		for _, fr := range list.Items {
			rollouts[fr.Name] = fr
		}
	}
	out := map[string]string{}
	for i := range pools {
		pool := &pools[i]
		var best *pick
		for _, name := range fleet.RolloutsOf(pool) {
			m, ok, _ := fleet.MemberOf(pool, name)
			if !ok {
				continue
			}
			fr, known := rollouts[name]
			running := known && fr.Status.Phase != nodepoolv1.FleetPhaseComplete && fr.Status.Phase != nodepoolv1.FleetPhaseCancelled
			var started time.Time
			if known && fr.Status.StartedAt != nil {
				started = fr.Status.StartedAt.Time
			}
			if best != nil && (best.running && !running || best.running == running && !started.After(best.started)) {
				continue
			}
			best = &pick{desc: fmt.Sprintf("%s(wave %d, %s)", name, m.Wave, strings.ToLower(string(m.State))), running: running, started: started}
		}
		if best != nil {
			out[pool.Namespace+"/"+pool.Name] = best.desc
		}
	}
	return out
}
