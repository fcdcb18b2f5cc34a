package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
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
	// Failed and Waiting are the pools failed and waiting, with why.
	Failed  []nodepoolv1.FleetRolloutPool `json:"failed,omitempty"`
	Waiting []nodepoolv1.FleetRolloutPool `json:"waiting,omitempty"`
}

func reportOf(fr *nodepoolv1.FleetRollout) FleetRolloutReport {
	r := FleetRolloutReport{Name: fr.Name, Action: string(fr.Spec.Action), Phase: string(fr.Status.Phase), Message: fr.Status.Message,
		CurrentWave: fr.Status.CurrentWave, Waves: fr.Status.Waves}
	if r.Phase == "" {
		r.Phase, r.Message = "Pending", "waiting for the controller to select the pools"
	}
	if r.Waves == nil {
		r.Waves = []nodepoolv1.FleetRolloutWave{}
	}
	for _, p := range fr.Status.Pools {
		switch p.State {
		case nodepoolv1.FleetPoolFailed:
			r.Failed = append(r.Failed, p)
		case nodepoolv1.FleetPoolWaiting:
			if p.Message != "" {
				r.Waiting = append(r.Waiting, p)
			}
		}
	}
	return r
}

// line is the one-line progress `fleet rollout status` prints on change.
func (r FleetRolloutReport) line() string {
	var done, total, rolling, waiting, skipped, failed int32
	for _, w := range r.Waves {
		total += w.Pools
		done += w.Done
		rolling += w.Rolling
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
failed. At the end (or at once with --watch=false) it prints the waves and the
pools that failed or wait, with why.

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
		_, fr, err := o.getFleetRollout(ctx, name)
		if err != nil {
			return err
		}
		r := reportOf(fr)
		if o.Output == "table" {
			if l := r.line(); l != last {
				fmt.Fprintln(o.out(), l)
				last = l
			}
		}
		finish := func(err error) error {
			if o.Output != "table" {
				if perr := o.printStructured(r); perr != nil {
					return perr
				}
				return err
			}
			if perr := r.table().print(o.out()); perr != nil {
				return perr
			}
			for _, p := range append(append([]nodepoolv1.FleetRolloutPool(nil), r.Failed...), r.Waiting...) {
				fmt.Fprintf(o.out(), "%s %s/%s (wave %d): %s\n", p.State, p.Namespace, p.Name, p.Wave, p.Message)
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

// fleetMembership names, for each pool, the fleet rollout it belongs to:
// from the FleetRollouts' status (one in progress first, else the newest),
// "" for a pool in none. A user who may not list FleetRollouts gets none
// (the pools' fleet-rollout annotation still shows the one driving them).
func fleetMembership(ctx context.Context, c client.Client) map[string]string {
	list := &nodepoolv1.FleetRolloutList{}
	if err := c.List(ctx, list); err != nil {
		return nil
	}
	type pick struct {
		desc    string
		running bool
		started time.Time
	}
	best := map[string]pick{}
	for _, fr := range list.Items {
		running := fr.Status.Phase != nodepoolv1.FleetPhaseComplete && fr.Status.Phase != nodepoolv1.FleetPhaseCancelled
		var started time.Time
		if fr.Status.StartedAt != nil {
			started = fr.Status.StartedAt.Time
		}
		for _, p := range fr.Status.Pools {
			key := p.Namespace + "/" + p.Name
			cur, ok := best[key]
			if ok && (cur.running && !running || cur.running == running && !started.After(cur.started)) {
				continue
			}
			best[key] = pick{desc: fmt.Sprintf("%s(wave %d, %s)", fr.Name, p.Wave, strings.ToLower(string(p.State))), running: running, started: started}
		}
	}
	out := map[string]string{}
	for k, v := range best {
		out[k] = v.desc
	}
	return out
}
