package scenario

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// Row is one step of the trace: the time, what happened, and each pool's
// state after it.
type Row struct {
	At    time.Time
	What  []string
	Pools []string
}

// PoolState is a one-line summary of a pool: machines by payload and
// state, ready/available, gates, and the engine's action, phase and
// health phase.
func (p *Pool) PoolState() string {
	now := p.w.Now
	type key struct{ payload, state string }
	counts := map[key]int{}
	gates := map[string]int{}
	ready, avail := 0, 0
	for _, m := range p.Machines {
		st := "boot"
		switch {
		case m.Payload == "":
			st = "nopayload"
		case !m.HasNode(now):
		case m.Phase != "":
			st = strings.ToLower(m.Phase)
		case m.NodeReady(now):
			st = "ready"
			ready++
		default:
			st = "sick"
		}
		if p.machineReady(m) {
			avail++
		}
		counts[key{Short(m.Payload), st}]++
		if m.Gate != nil {
			g := m.Gate.Reason
			if m.Gate.Status {
				g = "+" + g
			}
			gates[g]++
		}
	}
	var keys []key
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].payload != keys[j].payload {
			return keys[i].payload < keys[j].payload
		}
		return keys[i].state < keys[j].state
	})
	var ms []string
	for _, k := range keys {
		ms = append(ms, fmt.Sprintf("%d×%s:%s", counts[k], k.payload, k.state))
	}
	var gs []string
	for _, g := range sortedKeys(gates) {
		gs = append(gs, fmt.Sprintf("%d%s", gates[g], g))
	}
	action, health := "-", "-"
	if pl := p.lastPlan; pl != nil {
		action = string(pl.Decision.Action)
		if p.stepAction != "" {
			action = string(p.stepAction)
		}
		if pl.Decision.InProgress {
			action += "+rolling"
		}
		if h := pl.Decision.Health; h != nil {
			health = string(h.Phase)
			if health == "" {
				health = "Idle"
			}
		}
	}
	phase := p.Obj.Status.Updating
	if phase == "" {
		phase = "settled"
	}
	if c := meta.FindStatusCondition(p.Obj.Status.Conditions, nodepoolv1.ConditionMaintenanceWindow); c != nil && c.Status == "False" {
		phase += "/" + c.Reason
	}
	return fmt.Sprintf("%s: [%s] ready %d avail %d/%d gates [%s] | %s %s health %s", p.Name, strings.Join(ms, " "), ready, avail,
		p.desired(), strings.Join(gs, " "), action, phase, health)
}

func (p *Pool) desired() int32 {
	if p.MD != nil {
		return p.MD.Replicas
	}
	if p.MS != nil {
		return p.MS.Replicas
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// row appends a trace row when something happened or a pool's state
// changed since the last row.
func (w *World) row() {
	if w.Quiet || w.NoTrace {
		w.notes = nil
		for _, p := range w.pools {
			p.stepAction = ""
		}
		return
	}
	r := Row{At: w.Now, What: w.notes}
	w.notes = nil
	for _, p := range w.pools {
		r.Pools = append(r.Pools, p.PoolState())
		p.stepAction = ""
	}
	for _, f := range w.fleets {
		r.Pools = append(r.Pools, f.State())
	}
	if n := len(w.Rows); n > 0 && len(r.What) == 0 && strings.Join(w.Rows[n-1].Pools, "\n") == strings.Join(r.Pools, "\n") {
		return
	}
	w.Rows = append(w.Rows, r)
}

// Trace prints the rows as a table: time (and offset from the start),
// what happened, each pool's state.
func (w *World) Trace() string {
	var b strings.Builder
	var start time.Time
	for i, r := range w.Rows {
		if i == 0 {
			start = r.At
		}
		what := strings.Join(r.What, "; ")
		if what == "" {
			what = "·"
		}
		fmt.Fprintf(&b, "%s +%-9s %s\n", r.At.UTC().Format("2006-01-02T15:04:05Z"), offset(r.At.Sub(start)), what)
		for _, s := range r.Pools {
			fmt.Fprintf(&b, "    %s\n", s)
		}
	}
	return b.String()
}

func offset(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%s", int(d/(24*time.Hour)), (d % (24 * time.Hour)).String())
	default:
		return d.String()
	}
}

// Condition is a condition of the pool's status (nil when absent).
func (p *Pool) Condition(t string) *Cond {
	c := meta.FindStatusCondition(p.Obj.Status.Conditions, t)
	if c == nil {
		return nil
	}
	return &Cond{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// Cond is a condition's status, reason and message.
type Cond struct{ Status, Reason, Message string }

// Phase is the health phase of the pool's last decision ("" when none).
func (p *Pool) Phase() rollout.HealthPhase {
	if p.lastPlan == nil || p.lastPlan.Decision.Health == nil {
		return ""
	}
	return p.lastPlan.Decision.Health.Phase
}
