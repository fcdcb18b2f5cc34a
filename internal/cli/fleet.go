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
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// FleetRow is one pool of the fleet.
type FleetRow struct {
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	Cluster   string `json:"cluster"`
	Version   string `json:"version,omitempty"`
	Desired   int32  `json:"desired"`
	Ready     int32  `json:"ready"`
	UpToDate  int32  `json:"upToDate"`
	Updating  string `json:"updating,omitempty"`
	// Phase is where the pool's rollout stands, as the controller
	// published it (status.rollout.phase: Settled, Rolling, Held, ...);
	// "" before it has.
	Phase string `json:"phase,omitempty"`
	// Paused is spec.management.pausedUntil when the pool is paused.
	Paused string `json:"paused,omitempty"`
	// ManagementUpdates is the pool's policy for pending drift.
	ManagementUpdates string `json:"managementUpdates,omitempty"`
	// Drift is status.pendingManagementChanges with ages.
	Drift []FleetDrift `json:"drift"`
	// OldestDriftSeconds is the age of the oldest pending drift, 0 for none.
	OldestDriftSeconds int64 `json:"oldestDriftSeconds"`
	// NextWindow is the opening of the window a platform rollout may
	// start in (in the past while it is open), DriftDeadline when the
	// pending drift reaches spec.management.maintenance.driftDeadline.
	NextWindow    *time.Time `json:"nextWindow,omitempty"`
	DriftDeadline *time.Time `json:"driftDeadline,omitempty"`
	maintained    bool
	// alwaysOpen: the window open now has no start (it has been open for
	// longer than the engine looks back).
	alwaysOpen bool
	// FleetRollout is the fleet rollout the pool belongs to, with its wave
	// and state ("" for none).
	FleetRollout string `json:"fleetRollout,omitempty"`
	// RolloutUnhealthy is the reason of a False RolloutHealthy condition
	// (RolloutHalted, RollingBack, ProgressDeadlineExceeded), "" otherwise.
	RolloutUnhealthy string `json:"rolloutUnhealthy,omitempty"`
	// RunsLatestAt is, for a pool with pending drift, when it is forecast
	// to run the latest platform payload (fleet_predicted.go), nil when
	// never without action; RunsLatest says how (now, window, deadline,
	// pause-end, fleet ... wave N, never: why).
	RunsLatestAt *time.Time `json:"runsLatestAt,omitempty"`
	RunsLatest   string     `json:"runsLatest,omitempty"`
	// Draining is how many of the pool's nodes are being drained
	// (status.drains), DrainsBlocked how many of them past the drain
	// timeout with pods left (fleet_drains.go).
	Draining      int `json:"draining,omitempty"`
	DrainsBlocked int `json:"drainsBlocked,omitempty"`
}

// FleetDrift is one pending platform component of a pool.
type FleetDrift struct {
	Component  string    `json:"component"`
	Since      time.Time `json:"since"`
	AgeSeconds int64     `json:"ageSeconds"`
	Current    string    `json:"current"`
	Desired    string    `json:"desired"`
}

// Orders of `fleet --sort-by`.
var fleetOrders = map[string]func(a, b FleetRow) bool{
	"name": func(a, b FleetRow) bool { return a.Namespace+"/"+a.Pool < b.Namespace+"/"+b.Pool },
	"drift-age": func(a, b FleetRow) bool {
		return a.OldestDriftSeconds > b.OldestDriftSeconds
	},
	"drift":   func(a, b FleetRow) bool { return len(a.Drift) > len(b.Drift) },
	"cluster": func(a, b FleetRow) bool { return a.Namespace+"/"+a.Cluster < b.Namespace+"/"+b.Cluster },
	"version": func(a, b FleetRow) bool { return a.Version < b.Version },
}

func newFleetCommand(o *Options) *cobra.Command {
	var (
		sortBy      string
		pendingOnly bool
	)
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "List pools with their pending platform changes and how old they are",
		Long: `List the NodePools of the namespace (every namespace with -A), one row per pool:
cluster, version, machines ready and up to date of the desired count, the
phase the controller published for its rollout (status.rollout.phase: Settled,
Scaling, Rolling, Held, Halted, RollingBack, Invalid), the rollout in progress,
and the platform (management) components the nodes do not
run yet with the age of each (status.pendingManagementChanges). Pending drift
applies at a pool's next rollout, or now with kubectl nodepool rollout
apply-pending POOL. When a pool has maintenance settings, NEXT-WINDOW and
DRIFT-DEADLINE say when its next window opens for platform rollouts ("open"
while one is) and when its pending drift reaches spec.management.maintenance.driftDeadline.

--sort-by orders the rows: name (namespace/name, the default), drift-age (the
oldest pending change first), drift (most pending components first), cluster or
version. -o json gives every row with the drift's times and digests. The last
column names the fleet rollout the pool belongs to, with its wave and state
(kubectl nodepool fleet rollout creates one). RUNS-LATEST, for a pool with
pending drift, is when it is forecast to run the latest platform payload: its
fleet rollout wave's predicted end, or the rollout engine run in simulated time
over its policy, windows, deadline, pause and history (never: not without
action; kubectl nodepool fleet forecast says why). DRAINS, when a pool drains a
node, is how many of its nodes are being drained and how many of them are
blocked past the drain timeout (status.drains; kubectl nodepool rollout status
POOL names the pods that hold them).`,
		Example: `  # Which pools across the fleet have waited longest for platform changes?
  kubectl nodepool fleet -A --sort-by drift-age

  # Only the pools with pending drift, for a script.
  kubectl nodepool fleet -A --pending -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			less, ok := fleetOrders[sortBy]
			if !ok {
				var names []string
				for k := range fleetOrders {
					names = append(names, k)
				}
				sort.Strings(names)
				return fmt.Errorf("--sort-by %q: use one of %s", sortBy, strings.Join(names, ", "))
			}
			rows, err := o.fleet(cmd.Context(), pendingOnly)
			if err != nil {
				return err
			}
			sort.SliceStable(rows, func(i, j int) bool { return fleetOrders["name"](rows[i], rows[j]) })
			sort.SliceStable(rows, func(i, j int) bool { return less(rows[i], rows[j]) })
			if !o.tabular() {
				if rows == nil {
					rows = []FleetRow{}
				}
				objs := make([]object, 0, len(rows))
				for _, r := range rows {
					objs = append(objs, poolObject(r.Pool))
				}
				return o.printStructured(rows, objs...)
			}
			if len(rows) == 0 {
				_, err := fmt.Fprintln(o.out(), "No NodePools found.")
				return err
			}
			if o.wide() {
				return fleetWideTable(o.now(), rows).print(o.out())
			}
			return fleetTable(o.now(), rows).print(o.out())
		},
	}
	cmd.Flags().StringVar(&sortBy, "sort-by", "name", "order of the rows: name, drift-age, drift, cluster or version")
	cmd.Flags().BoolVar(&pendingOnly, "pending", false, "only pools with pending platform changes")
	return cmd
}

func (o *Options) fleet(ctx context.Context, pendingOnly bool) ([]FleetRow, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	var opts []client.ListOption
	where := "in every namespace"
	if !o.AllNamespaces {
		ns, err := o.namespace()
		if err != nil {
			return nil, err
		}
		opts, where = append(opts, client.InNamespace(ns)), "in namespace "+ns
	}
	list := &nodepoolv1.NodePoolList{}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing NodePools %s: %w", where, err)
	}
	rows := fleetRows(o.now(), list.Items, pendingOnly)
	member := fleetMembership(ctx, c, list.Items)
	for i := range rows {
		if m := member[rows[i].Namespace+"/"+rows[i].Pool]; m != "" {
			rows[i].FleetRollout = m
		}
	}
	if err := o.runsLatest(ctx, c, o.now(), rows, list.Items); err != nil {
		return nil, err
	}
	return rows, nil
}

// fleetRows summarises pools from their status.
func fleetRows(now time.Time, pools []nodepoolv1.NodePool, pendingOnly bool) []FleetRow {
	var rows []FleetRow
	for _, p := range pools {
		r := FleetRow{
			Namespace: p.Namespace, Pool: p.Name, Cluster: p.Spec.ClusterName, Version: p.Status.Version,
			Ready: p.Status.ReadyReplicas, UpToDate: p.Status.UpdatedReplicas, Updating: p.Status.Updating,
			ManagementUpdates: string(p.Spec.Management.ManagementUpdates), Drift: []FleetDrift{},
			FleetRollout: p.Annotations[nodepoolv1.AnnotationFleetRollout],
		}
		// The fleet reads the pools' status only (no per-pool observe):
		// the count the engine last decided, or, before the controller
		// wrote one, the rule applied to the replicas the status reports.
		r.Desired = p.Status.DesiredReplicas
		if r.Desired == 0 {
			r.Desired = poolmath.DesiredReplicas(&p.Spec, &p.Status.Replicas)
		}
		if st := p.Status.Rollout; st != nil {
			r.Phase = string(st.Phase)
		}
		r.RolloutUnhealthy = rolloutUnhealthy(&p) // status_health.go
		if poolmath.PauseAt(&p, now).Paused {
			r.Paused = p.Spec.Management.PausedUntil
		}
		for _, d := range p.Status.PendingManagementChanges {
			a := int64(now.Sub(d.Since.Time).Seconds())
			r.Drift = append(r.Drift, FleetDrift{Component: d.Component, Since: d.Since.UTC(), AgeSeconds: a, Current: d.Current, Desired: d.Desired})
			r.OldestDriftSeconds = max(r.OldestDriftSeconds, a)
		}
		windowFleet(&r, &p) // window.go
		drainsFleet(&r, &p) // fleet_drains.go
		if pendingOnly && len(r.Drift) == 0 {
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

func fleetTable(now time.Time, rows []FleetRow) *table {
	return fleetColumns(now, rows, false)
}

// fleetWideTable is -o wide: every column, also those no pool fills, and
// each pool's policy for pending drift (MANAGEMENT-UPDATES).
func fleetWideTable(now time.Time, rows []FleetRow) *table {
	return fleetColumns(now, rows, true)
}

func fleetColumns(now time.Time, rows []FleetRow, wide bool) *table {
	t := &table{header: []string{"NAMESPACE", "POOL", "CLUSTER", "VERSION", "READY", "UP-TO-DATE", "PHASE", "UPDATING", "PAUSED", "PENDING-DRIFT", "OLDEST-DRIFT"}}
	if wide {
		t.header = append(t.header, "MANAGEMENT-UPDATES")
	}
	windows := wide || withWindows(rows) // window.go: the window columns when a pool has maintenance settings
	if windows {
		t.header = append(t.header, "NEXT-WINDOW", "DRIFT-DEADLINE")
	}
	fleets := wide || withFleetRollouts(rows) // the fleet rollout column when a pool belongs to one
	if fleets {
		t.header = append(t.header, "FLEET-ROLLOUT")
	}
	latest := wide // the forecast column when a pool has pending drift
	for _, r := range rows {
		latest = latest || r.RunsLatest != ""
	}
	if latest {
		t.header = append(t.header, "RUNS-LATEST")
	}
	drains := wide || withDrains(rows) // fleet_drains.go: the drains column when a pool drains a node
	if drains {
		t.header = append(t.header, "DRAINS")
	}
	for _, r := range rows {
		var drift []string
		for _, d := range r.Drift {
			drift = append(drift, fmt.Sprintf("%s(%s)", d.Component, age(now, d.Since)))
		}
		oldest := "-"
		if len(r.Drift) > 0 {
			oldest = age(now, now.Add(-time.Duration(r.OldestDriftSeconds)*time.Second))
		}
		paused := "-"
		if r.Paused != "" {
			paused = "until " + r.Paused
			if r.Paused == "true" {
				paused = "yes"
			}
		}
		row := []string{r.Namespace, r.Pool, r.Cluster, or(r.Version, "-"), fmt.Sprintf("%d/%d", r.Ready, r.Desired), fmt.Sprintf("%d/%d", r.UpToDate, r.Desired),
			or(r.Phase, "-"), updatingCell(r), paused, or(strings.Join(drift, ","), "-"), oldest}
		if wide {
			row = append(row, or(r.ManagementUpdates, "-"))
		}
		if windows {
			next := whenCell(now, r.NextWindow, "open")
			if r.NextWindow == nil && r.alwaysOpen {
				next = "open"
			}
			row = append(row, next, whenCell(now, r.DriftDeadline, "passed"))
		}
		if fleets {
			row = append(row, or(r.FleetRollout, "-"))
		}
		if latest {
			row = append(row, runsLatestCell(now, r))
		}
		if drains {
			row = append(row, drainsCell(r))
		}
		t.add(row...)
	}
	return t
}

// withFleetRollouts reports whether a row belongs to a fleet rollout.
func withFleetRollouts(rows []FleetRow) bool {
	for _, r := range rows {
		if r.FleetRollout != "" {
			return true
		}
	}
	return false
}

// runsLatestCell is when the pool is forecast to run the latest platform
// payload: "-" when it does, "never" when not without action.
func runsLatestCell(now time.Time, r FleetRow) string {
	switch {
	case r.RunsLatest == "":
		return "-"
	case strings.HasPrefix(r.RunsLatest, "unknown"):
		return "unknown"
	case r.RunsLatestAt == nil:
		return "never"
	}
	return forecastTime(now, r.RunsLatestAt)
}
