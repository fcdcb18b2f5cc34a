package bench

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"nodepool.dev/nodepool/test/harness"
)

// Environment of BenchmarkFleet's settle and quiet phases.
const (
	// QuietAfterEnv is how long after the settle the quiet phase starts
	// (a duration, default 2m): Cluster API's last status updates of the
	// settle are reconciled by then.
	QuietAfterEnv = "NODEPOOL_BENCH_QUIET_AFTER"
	// QuietForEnv is how long the quiet phase is measured (default 1m).
	QuietForEnv = "NODEPOOL_BENCH_QUIET_FOR"
	// SettleOnlyEnv, set to 1, ends each fleet's run after its quiet phase
	// (no resync, edits, bump, nor the rollout comparison): the figures of
	// a settle and a settled fleet, in a few minutes.
	SettleOnlyEnv = "NODEPOOL_BENCH_SETTLE_ONLY"
	// ControllerArgsEnv adds flags to every controller process the
	// benchmark starts, space-separated (e.g. "--concurrency 40"): to
	// measure a setting against the defaults.
	ControllerArgsEnv = "NODEPOOL_BENCH_CONTROLLER_ARGS"
)

// The user agents (up to the "/") of the fleet's clients: the controller
// process (nodepool unsharded, nodepool-controller-<shard> a shard),
// Cluster API's controllers, the sim provider; the benchmark's own are the
// rest.
const (
	agentController = "nodepool"
	agentCAPI       = harness.CAPIUserAgent
	agentSim        = "sim-provider"
)

// kindWrites is one row of the writes of a phase: a client's writes of
// one resource, by verb, over the fleet.
type kindWrites struct {
	Agent    string         `json:"agent"`
	Resource string         `json:"resource"`
	Verbs    map[string]int `json:"verbs"`
	// Failed are those answered with an error (409: a conflict).
	Failed int `json:"failed"`
}

func (k kindWrites) total() int {
	n := 0
	for _, v := range k.Verbs {
		n += v
	}
	return n
}

// writesByKind groups an audit log's writes by client and resource,
// largest first.
func writesByKind(ws []harness.AuditWrite) []kindWrites {
	byKey := map[[2]string]*kindWrites{}
	for _, w := range ws {
		agent := w.Agent
		switch {
		case agent == agentController, agent == agentCAPI, agent == agentSim:
		case strings.HasPrefix(agent, "nodepool-controller"): // a shard's
		default:
			agent = "other (" + agent + ")"
		}
		k := [2]string{agent, w.Resource}
		kw := byKey[k]
		if kw == nil {
			kw = &kindWrites{Agent: agent, Resource: w.Resource, Verbs: map[string]int{}}
			byKey[k] = kw
		}
		kw.Verbs[w.Verb]++
		if w.Code >= 400 {
			kw.Failed++
		}
	}
	out := make([]kindWrites, 0, len(byKey))
	for _, kw := range byKey {
		out = append(out, *kw)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].total() != out[j].total() {
			return out[i].total() > out[j].total()
		}
		return out[i].Agent+out[i].Resource < out[j].Agent+out[j].Resource
	})
	return out
}

// agentWrites is the writes of rows by agent ("" every agent;
// agentController: the controller, unsharded or a shard).
func agentWrites(rows []kindWrites, agent string) int {
	n := 0
	for _, r := range rows {
		if agent == "" || r.Agent == agent || agent == agentController && strings.HasPrefix(r.Agent, "nodepool-controller") {
			n += r.total()
		}
	}
	return n
}

// peakWritesPerSecond is the most writes agent made in any 10 s of ws
// (agentWrites' agents), per second.
func peakWritesPerSecond(ws []harness.AuditWrite, agent string) float64 {
	bySlot := map[int64]int{}
	peak := 0
	for _, w := range ws {
		if w.Agent != agent && !(agent == agentController && strings.HasPrefix(w.Agent, "nodepool-controller")) {
			continue
		}
		slot := w.At.Unix() / 10
		bySlot[slot]++
		peak = max(peak, bySlot[slot])
	}
	return float64(peak) / 10
}

// formatWrites is a table of rows, per pool of a fleet of n.
func formatWrites(title string, rows []kindWrites, n int) string {
	var t strings.Builder
	fmt.Fprintf(&t, "\n%s (%d pools; per pool; creates are the objects made)\n", title, n)
	fmt.Fprintf(&t, "| %-24s | %-36s | %8s | %8s | %8s | %8s | %6s |\n", "client", "resource", "create", "patch", "update", "delete", "failed")
	for _, r := range rows {
		per := func(v int) string { return strconv.FormatFloat(float64(v)/float64(n), 'f', 2, 64) }
		fmt.Fprintf(&t, "| %-24s | %-36s | %8s | %8s | %8s | %8s | %6d |\n", r.Agent, r.Resource,
			per(r.Verbs["create"]), per(r.Verbs["patch"]), per(r.Verbs["update"]), per(r.Verbs["delete"]+r.Verbs["deletecollection"]), r.Failed)
	}
	return t.String()
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration", name, v)
	}
	return d
}

// readAudit is the writes of the fleet's audit log in [from, to), once
// the API server's batch log has caught up with to.
func readAudit(b *testing.B, f *fleet, from, to time.Time) []harness.AuditWrite {
	b.Helper()
	if f.audit == "" {
		return nil
	}
	if wait := time.Until(to.Add(5 * time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	ws, err := harness.ReadAudit(f.audit, from, to)
	must(b, err)
	return ws
}

// measureQuiet measures the settled fleet from QuietAfterEnv after
// settled for QuietForEnv: every client's writes (the audit log) and the
// controller's reconciles.
func measureQuiet(b *testing.B, f *fleet, p controllers, settled time.Time, res *fleetResult) {
	b.Helper()
	after, span := envDuration(b, QuietAfterEnv, 2*time.Minute), envDuration(b, QuietForEnv, time.Minute)
	if wait := time.Until(settled.Add(after)); wait > 0 {
		time.Sleep(wait)
	}
	from, r0, w0 := time.Now(), p.reconciles(b), p.writes(b)
	ig0, wk0 := p.capiUpdates(b, "ignored"), p.capiUpdates(b, "woke")
	time.Sleep(span)
	to := time.Now()
	res.QuietCAPIUpdatesIgnored, res.QuietCAPIUpdatesWoke = p.capiUpdates(b, "ignored")-ig0, p.capiUpdates(b, "woke")-wk0
	mins := to.Sub(from).Minutes()
	res.QuietReconcilesPerSecond = (p.reconciles(b) - r0) / to.Sub(from).Seconds()
	res.QuietControllerRequestsPerMin = (p.writes(b) - w0) / mins
	res.QuietWrites = writesByKind(readAudit(b, f, from, to))
	res.QuietWritesPerMin = float64(agentWrites(res.QuietWrites, "")) / mins
	res.QuietControllerWritesPerMin = float64(agentWrites(res.QuietWrites, agentController)) / mins
	res.QuietCAPIWritesPerMin = float64(agentWrites(res.QuietWrites, agentCAPI)) / mins
	res.QuietLoadAverage = loadAverage()
	b.Logf("quiet phase (%s after the settle, for %s): %.2f reconciles/s; writes/min: %.1f controller, %.1f Cluster API, %.1f in all; Cluster API updates %.0f ignored, %.0f woke a pool; load %s",
		after, span, res.QuietReconcilesPerSecond, res.QuietControllerWritesPerMin, res.QuietCAPIWritesPerMin, res.QuietWritesPerMin,
		res.QuietCAPIUpdatesIgnored, res.QuietCAPIUpdatesWoke, res.QuietLoadAverage)
	if len(res.QuietWrites) > 0 {
		b.Log(formatWrites("writes in the quiet phase", res.QuietWrites, res.Pools))
	}
}

// capiUpdates is the controller's Cluster API updates seen with result
// (ignored, woke: capi_watches.go).
func (p *controllerProcess) capiUpdates(b *testing.B, result string) float64 {
	return p.sum(b, "nodepool_capi_updates_total", func(l map[string]string) bool { return l["result"] == result })
}
