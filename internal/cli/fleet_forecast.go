package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/fleet"
	"nodepool.dev/nodepool/internal/fleet/selection"
	"nodepool.dev/nodepool/internal/history/listing"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/scenario"
)

// ExitNeverConverges is the exit status of `fleet forecast` when a pool
// never runs the new payload without action.
const ExitNeverConverges = 4

// ForecastResult is what `fleet forecast` prints.
type ForecastResult struct {
	Now            time.Time `json:"now"`
	HorizonSeconds int64     `json:"horizonSeconds"`
	FleetRollout   string    `json:"fleetRollout,omitempty"`
	// Pools is one row per pool.
	Pools   []ForecastPool  `json:"pools"`
	Summary ForecastSummary `json:"summary"`
	// Waves are, with a FleetRollout, when each wave starts and ends.
	Waves []ForecastWave `json:"waves,omitempty"`
	// FleetEnd is when the FleetRollout completes.
	FleetEnd *time.Time `json:"fleetEnd,omitempty"`
	Notes    []string   `json:"notes,omitempty"`
}

// ForecastPool is the forecast of one pool.
type ForecastPool struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	Machines  int32  `json:"machines"`
	// Components are the platform components whose latest digest differs
	// from what the nodes run, each with whether a rollout carries it.
	Components []ForecastComponent `json:"components,omitempty"`
	// Rolls is whether the change replaces (or updates) the nodes.
	Rolls bool `json:"rolls"`
	// When is no-change, now, window, deadline, pause-end, fleet or never.
	When  string     `json:"when"`
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// EndLow and EndHigh are Start plus the fastest and slowest
	// predicted duration (and HeldSeconds); End is Start plus the likely
	// one Takes says (and HeldSeconds), between them.
	EndLow  *time.Time `json:"endLow,omitempty"`
	EndHigh *time.Time `json:"endHigh,omitempty"`
	// Takes is the predicted duration and what it is from.
	Takes string `json:"takes,omitempty"`
	// HeldSeconds is how much longer than predicted the rollout takes
	// because something holds it once started (a window that closes).
	HeldSeconds int64 `json:"heldSeconds,omitempty"`
	// FromSettings is set when the pool's history is too short (fewer
	// than 3 rollouts): the declared settings, 15m a round.
	FromSettings bool `json:"fromSettings"`
	Samples      int  `json:"samples"`
	// Peers is how many pools like it (the same template kind and
	// provider, upgrade type, a machine count within a factor of two)
	// a pool with too short a history is predicted from; Basis names them.
	Peers  int      `json:"peers,omitempty"`
	Basis  string   `json:"basis,omitempty"`
	Holds  []string `json:"holds,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Wave   int32    `json:"wave,omitempty"`
}

// ForecastComponent is one changed component of a pool.
type ForecastComponent struct {
	Component string `json:"component"`
	Delivery  string `json:"delivery"`
	Rolls     bool   `json:"rolls"`
	How       string `json:"how"`
}

// ForecastSummary is the fleet's: when each share of the pools and of
// their nodes runs the new payload (nil: never without action).
type ForecastSummary struct {
	Pools   int               `json:"pools"`
	Nodes   int32             `json:"nodes"`
	PoolsAt []ForecastPercent `json:"poolsAt"`
	NodesAt []ForecastPercent `json:"nodesAt"`
	Never   []string          `json:"never"`
}

// ForecastPercent is when a share runs the new payload.
type ForecastPercent struct {
	Percent int        `json:"percent"`
	At      *time.Time `json:"at"`
}

// ForecastWave is when a FleetRollout's wave starts and ends.
type ForecastWave struct {
	Wave  int32      `json:"wave"`
	Pools int32      `json:"pools"`
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
}

func newFleetForecastCommand(o *Options) *cobra.Command {
	var (
		files       []string
		fleetFile   string
		horizonDays int
	)
	cmd := &cobra.Command{
		Use:   "forecast -f management-config.yaml [--fleet-rollout FILE]",
		Short: "Forecast when every pool runs a platform change, without applying it",
		Long: `Forecast, without applying or writing anything, when each pool would run the
platform payload of the given manifests (the edited management config, and the
ConfigMaps and Secrets it reads): the edited objects are laid over the cluster
as for plan, each pool's latest payload is rendered with them, and the
controller's own rollout engine (and, with --fleet-rollout, the fleet
decision) runs over every pool in simulated time: each pool with its spec
(managementUpdates, maintenance windows with their time zones and exclusions,
drift deadline, health gate, pause) and its machines timed by its own rollout
history (the median time per round of its recent rollouts; with fewer than 3 of
them, the declared settings: 15m a round, which errs long).

Per pool it prints which platform components change and whether a rollout
carries them (managementUpdates: Rollout rolls them; NewNodes and
OnNextRollout wait for an owner change), when its rollout starts (now, at its
next window, at its drift deadline, when its pause ends, when its fleet wave
triggers it) and ends, how long it takes and from how many rollouts that is
known, and what holds it (paused, an exclusion, outside its windows, halted).
Then when 50%, 90% and 100% of the pools and of their nodes run the new
payload, the pools that never will without action, and, with a FleetRollout
manifest, when each of its waves starts and ends.

With --fleet-rollout alone (no -f) the forecast is of the pools' pending drift
under that FleetRollout. Exit status 4 when a pool never runs the new payload
within the horizon without action, 1 on an error.`,
		Example: `  # When would every pool run a new API-server proxy image?
  kubectl nodepool fleet forecast -A -f management-config.yaml

  # And rolled out in waves by this FleetRollout?
  kubectl nodepool fleet forecast -A -f management-config.yaml --fleet-rollout platform-rollout.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 && fleetFile == "" {
				return fmt.Errorf("give the edited management config with -f FILE (and/or a FleetRollout manifest with --fleet-rollout FILE)")
			}
			if horizonDays < 1 || horizonDays > 366 {
				return fmt.Errorf("--horizon-days %d: use 1 to 366", horizonDays)
			}
			return o.asAnswer(o.forecast(cmd.Context(), files, fleetFile, time.Duration(horizonDays)*24*time.Hour))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "edited management config, ConfigMaps and Secrets (YAML or JSON; - for standard input)")
	cmd.Flags().StringVar(&fleetFile, "fleet-rollout", "", "a FleetRollout manifest to forecast the rollout of the change in waves")
	cmd.Flags().IntVar(&horizonDays, "horizon-days", int(scenario.DefaultForecastHorizon/(24*time.Hour)), "how many days ahead to look: a pool not converged by then never converges without action")
	return cmd
}

func (o *Options) forecast(ctx context.Context, files []string, fleetFile string, horizon time.Duration) error {
	c, err := o.kubeClient()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	missing, err := o.missingForPrediction(ctx, ns)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &limitedError{fmt.Sprintf("fleet forecast cannot run the controller's engine for namespace %s: it observes the pools as the controller does and renders their payloads with its settings; it needs %s. `kubectl nodepool fleet` shows the published forecast (RUNS-LATEST) without them.",
			ns, missingWords(missing))}
	}
	ctl, err := o.controllerSettings(ctx, c)
	if err != nil {
		return err
	}
	sources := newOverlay(c)
	var pools []nodepoolv1.NodePool
	if len(files) > 0 {
		m, err := readManifests(files, o.In, ns)
		if err != nil {
			return err
		}
		if len(m.pools) > 0 {
			return fmt.Errorf("fleet forecast takes the management config (and the ConfigMaps and Secrets it reads), not NodePools: plan a NodePool edit with kubectl nodepool plan")
		}
		for _, obj := range m.objects {
			if err := sources.add(obj); err != nil {
				return err
			}
		}
		if pools, err = o.poolsReading(ctx, c, m.objects, ctl.inputs.ManagementConfig, ns); err != nil {
			return err
		}
	}
	var fc *scenario.ForecastFleet
	if fleetFile != "" {
		fr, err := readFleetRollout(ctx, c, fleetFile)
		if err != nil {
			return err
		}
		refs, selected, err := selectFleetPools(ctx, c, fr)
		if err != nil {
			return err
		}
		fc = &scenario.ForecastFleet{Name: fr.Name, Spec: fr.Spec, Pools: refs}
		pools = mergePools(pools, selected)
	}
	if len(pools) == 0 {
		return fmt.Errorf("no NodePool reads the given objects or is selected: nothing to forecast (-n/-A for the pools of another namespace)")
	}
	now := o.now()
	in := scenario.ForecastInput{Now: now, Horizon: horizon, Settings: ctl.engine, Fleet: fc}
	var notes []string
	for i := range pools {
		p := &pools[i]
		d, err := o.decide(ctx, c, sources, p)
		if err != nil {
			return err
		}
		past, err := listing.RecentRollouts(ctx, c, p)
		if err != nil {
			return fmt.Errorf("NodePool %s/%s: %w", p.Namespace, p.Name, err)
		}
		// Its halt (scenario.HaltOf) and the requests it holds are read
		// from the pool.
		fp := scenario.ForecastPool{Pool: p, Machines: d.Plan.Decision.Replicas, Past: past, Change: scenario.ChangesOf(d.Plan.Pending)}
		if d.In.RenderErr != nil {
			notes = append(notes, fmt.Sprintf("%s/%s: its inputs do not render (%v): it is forecast on what it runs", p.Namespace, p.Name, d.In.RenderErr))
		}
		if dec := d.Plan.Decision; dec.InProgress {
			notes = append(notes, fmt.Sprintf("%s/%s: a rollout is in progress: the forecast takes the pool as settled on what its machines run", p.Namespace, p.Name))
		}
		in.Pools = append(in.Pools, fp)
	}
	res := forecastResult(scenario.RunForecast(in))
	res.Notes = append(notes, res.Notes...)
	if fc != nil {
		res.FleetRollout = fc.Name
	}
	if !o.tabular() {
		objs := make([]object, 0, len(res.Pools))
		for _, p := range res.Pools {
			objs = append(objs, poolObject(p.Pool))
		}
		if err := o.printStructured(res, objs...); err != nil {
			return err
		}
	} else if err := printForecast(o, res); err != nil {
		return err
	}
	if len(res.Summary.Never) > 0 {
		return &ExitError{Code: ExitNeverConverges, Err: fmt.Errorf("%d pool(s) never run the new payload without action: %s", len(res.Summary.Never), strings.Join(res.Summary.Never, ", "))}
	}
	return nil
}

// readFleetRollout reads a FleetRollout manifest and has the API server
// validate and default it (a server-side dry run: nothing is stored).
func readFleetRollout(ctx context.Context, c client.Client, file string) (*nodepoolv1.FleetRollout, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading --fleet-rollout %s: %w", file, err)
	}
	fr := &nodepoolv1.FleetRollout{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(bytes.NewReader(b)), 4096).Decode(fr); err != nil {
		return nil, fmt.Errorf("--fleet-rollout %s: %w", file, err)
	}
	if fr.Kind != "FleetRollout" {
		return nil, fmt.Errorf("--fleet-rollout %s is a %q: give a FleetRollout (%s)", file, fr.Kind, nodepoolv1.GroupVersion)
	}
	if fr.Name == "" {
		fr.GenerateName = "forecast-"
	}
	check := fr.DeepCopy()
	check.ResourceVersion, check.Status = "", nodepoolv1.FleetRolloutStatus{}
	if err := c.Create(ctx, check, client.DryRunAll); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("--fleet-rollout %s: a FleetRollout %s exists already: rename the one to forecast (the forecast does not create it)", file, fr.Name)
		}
		return nil, fmt.Errorf("--fleet-rollout %s: the API server refuses it: %s", file, apiMessage(err))
	}
	check.Name = or(fr.Name, "forecast")
	return check, nil
}

// selectFleetPools are the pools the FleetRollout would select, as its
// controller selects them when it starts.
func selectFleetPools(ctx context.Context, c client.Reader, fr *nodepoolv1.FleetRollout) ([]fleet.Ref, []nodepoolv1.NodePool, error) {
	refs, err := selection.Pools(ctx, c, fr)
	if err != nil {
		return nil, nil, fmt.Errorf("FleetRollout %s: %w", fr.Name, err)
	}
	var pools []nodepoolv1.NodePool
	for _, r := range refs {
		p := nodepoolv1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, &p); err != nil {
			return nil, nil, fmt.Errorf("reading NodePool %s: %w", r, err)
		}
		pools = append(pools, p)
	}
	return refs, pools, nil
}

// mergePools adds the pools of b not in a, by namespace and name.
func mergePools(a, b []nodepoolv1.NodePool) []nodepoolv1.NodePool {
	seen := map[string]bool{}
	for _, p := range a {
		seen[p.Namespace+"/"+p.Name] = true
	}
	for _, p := range b {
		if !seen[p.Namespace+"/"+p.Name] {
			a = append(a, p)
		}
	}
	sort.SliceStable(a, func(i, j int) bool { return a[i].Namespace+"/"+a[i].Name < a[j].Namespace+"/"+a[j].Name })
	return a
}

// forecastResult words the forecast for printing.
func forecastResult(f scenario.Forecast) ForecastResult {
	r := ForecastResult{Now: f.Now, HorizonSeconds: int64(f.Horizon.Seconds()), FleetEnd: f.FleetEnd, Notes: f.Notes}
	for _, p := range f.Pools {
		row := ForecastPool{Namespace: p.Namespace, Pool: p.Name, Machines: p.Machines, Rolls: p.Rolls, When: p.When,
			Start: p.Start, End: p.End, EndLow: p.EndLow, EndHigh: p.EndHigh, Holds: p.Holds, Reason: p.Reason, Wave: p.Wave,
			FromSettings: p.Prediction.FromSettings, Samples: p.Prediction.Samples, Peers: p.Prediction.Peers, Basis: p.Basis}
		for _, c := range p.Components {
			row.Components = append(row.Components, ForecastComponent{Component: c.Component, Delivery: c.Delivery, Rolls: c.Rolls, How: c.How})
		}
		if p.Start != nil && p.When != scenario.WhenNoChange {
			row.Takes = takes(p.Prediction, p.Basis)
			if p.Held > 0 {
				row.HeldSeconds = int64(p.Held.Seconds())
				row.Takes += ", held " + short(p.Held) + " once started"
			}
		}
		r.Pools = append(r.Pools, row)
		r.Summary.Pools++
		r.Summary.Nodes += p.Machines
	}
	for _, pct := range scenario.Percents {
		r.Summary.PoolsAt = append(r.Summary.PoolsAt, ForecastPercent{Percent: pct, At: f.PoolsAt[pct]})
		r.Summary.NodesAt = append(r.Summary.NodesAt, ForecastPercent{Percent: pct, At: f.NodesAt[pct]})
	}
	r.Summary.Never = append([]string{}, f.Never...)
	for _, w := range f.Waves {
		r.Waves = append(r.Waves, ForecastWave{Wave: w.Wave, Pools: w.Pools, Start: w.Start, End: w.End})
	}
	return r
}

// takes says how long a pool's rollout takes and how sure that is, and
// what it is from: its own history, the pools like it (basis) when its
// own is too short, else the declared settings.
func takes(p poolmath.Prediction, basis string) string {
	if p.Shape.Rounds <= 0 {
		return ""
	}
	if p.Peers > 0 {
		return fmt.Sprintf("%s (from %s, %s–%s; history: %d rollouts, fewer than %d)",
			short(p.Likely), basis, short(p.Low), short(p.High), p.Short, poolmath.MinPredictionSamples)
	}
	if p.FromSettings {
		return fmt.Sprintf("%s by the declared settings (%s a round; history: %d rollouts, fewer than %d)",
			short(p.Likely), short(poolmath.DefaultRoundDuration), p.Short, poolmath.MinPredictionSamples)
	}
	return fmt.Sprintf("%s (from %d rollouts, %s–%s)", short(p.Likely), p.Samples, short(p.Low), short(p.High))
}

// short is a duration to the minute (to the second below one), without
// its trailing zero units: 12m, 1h30m, 45s.
func short(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := d.Round(time.Minute).String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// forecastTime is a time in a forecast's table.
func forecastTime(now time.Time, t *time.Time) string {
	if t == nil {
		return "never"
	}
	s := t.UTC().Format("2006-01-02 15:04Z")
	if d := t.Sub(now); d >= time.Minute {
		s += " (+" + age(*t, now) + ")"
	}
	return s
}

func printForecast(o *Options, r ForecastResult) error {
	t := &table{header: []string{"NAMESPACE", "POOL", "NODES", "CHANGE", "ROLLS", "STARTS", "ENDS", "TAKES", "HOLDS"}}
	for _, p := range r.Pools {
		var change []string
		for _, c := range p.Components {
			change = append(change, c.Component+"("+c.Delivery+")")
		}
		starts := p.When
		switch {
		case p.When == scenario.WhenNoChange || p.When == scenario.WhenNever:
		case p.Wave > 0:
			starts = fmt.Sprintf("wave %d %s", p.Wave, forecastTime(r.Now, p.Start))
		default:
			starts += " " + forecastTime(r.Now, p.Start)
		}
		ends := "-"
		if p.When != scenario.WhenNoChange {
			ends = forecastTime(r.Now, p.End)
		}
		rolls := "no"
		if p.Rolls {
			rolls = "yes"
		}
		t.add(p.Namespace, p.Pool, fmt.Sprint(p.Machines), or(strings.Join(change, ","), "-"), rolls, starts, ends, or(p.Takes, "-"), or(strings.Join(p.Holds, "; "), "-"))
	}
	if err := t.print(o.out()); err != nil {
		return err
	}
	w := o.out()
	share := func(what string, at []ForecastPercent) {
		var parts []string
		for _, p := range at {
			parts = append(parts, fmt.Sprintf("%d%% %s", p.Percent, forecastTime(r.Now, p.At)))
		}
		fmt.Fprintf(w, "%s running the new payload: %s\n", what, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	share(fmt.Sprintf("Pools (%d)", r.Summary.Pools), r.Summary.PoolsAt)
	share(fmt.Sprintf("Nodes (%d)", r.Summary.Nodes), r.Summary.NodesAt)
	for _, wv := range r.Waves {
		fmt.Fprintf(w, "FleetRollout %s wave %d (%d pools): starts %s, ends %s\n", r.FleetRollout, wv.Wave, wv.Pools, forecastTime(r.Now, wv.Start), forecastTime(r.Now, wv.End))
	}
	if r.FleetRollout != "" {
		fmt.Fprintf(w, "FleetRollout %s completes: %s\n", r.FleetRollout, forecastTime(r.Now, r.FleetEnd))
	}
	for _, p := range r.Pools {
		if p.When == scenario.WhenNever {
			fmt.Fprintf(w, "Never without action: %s/%s: %s\n", p.Namespace, p.Pool, p.Reason)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	return nil
}
