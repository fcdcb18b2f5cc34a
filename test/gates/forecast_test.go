package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

// plugin runs kubectl nodepool against the stack and returns its output
// and exit code.
func plugin(t *testing.T, ns string, args ...string) (string, string, int) {
	t.Helper()
	kc, err := st.WriteKubeconfig("kubeconfig-forecast", "default")
	if err != nil {
		t.Fatal(err)
	}
	full := []string{"--kubeconfig", kc}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, append(full, args...))
	return out.String(), errOut.String(), code
}

// writeManifest writes obj as YAML into the test's folder.
func writeManifest(t *testing.T, name string, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func forecastJSON(t *testing.T, out string) cli.ForecastResult {
	t.Helper()
	var r cli.ForecastResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not a forecast: %v\n%s", err, out)
	}
	return r
}

// near reports whether a and b are within d of each other.
func near(a, b time.Time, d time.Duration) bool { return a.Sub(b) <= d && b.Sub(a) <= d }

// `fleet forecast` of an edited management config over pools of every
// policy: a Rollout pool rolls now; one whose window (Asia/Tokyo) opens in
// five hours rolls then; one in an exclusion rolls when it ends; an
// OnNextRollout pool with a one-hour drift deadline rolls at the deadline;
// a paused pool when its pause ends; a NewNodes pool never (its nodes keep
// what they run until an owner change), so the exit status is 4. The
// pools are new: the forecast says their durations come from the
// declared settings. Nothing is written: no pool reports drift after.
func TestTheFleetForecastOfAManagementChangeSaysWhenEachPolicyRollsIt(t *testing.T) {
	t.Parallel() // reads the management config, changes nothing shared
	pools := newFleetPools(t, "forecast-policies", 6, 6)
	ns := pools[0].Namespace
	now := time.Now().UTC()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	opens := now.In(tokyo).Truncate(time.Minute).Add(5 * time.Hour)
	exclusionEnd := now.Truncate(time.Minute).Add(2 * time.Hour)
	pauseEnd := now.Truncate(time.Second).Add(3 * time.Hour)
	edits := []func(*nodepoolv1.NodePool){
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
		},
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
				Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Asia/Tokyo"}}}
		},
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
				Windows:    []nodepoolv1.MaintenanceWindow{{Schedule: "0 * * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}},
				Exclusions: []nodepoolv1.MaintenanceExclusion{{Name: "freeze", Start: metav1.NewTime(now.Add(-time.Hour)), End: metav1.NewTime(exclusionEnd)}}}
		},
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{DriftDeadline: &metav1.Duration{Duration: time.Hour}}
		},
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			p.Spec.Management.PausedUntil = pauseEnd.Format(time.RFC3339)
		},
		func(p *nodepoolv1.NodePool) {
			p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
		},
	}
	for i, p := range pools {
		stack.Update(t, env.Client, p, edits[i])
	}
	for _, p := range pools {
		st.WaitForPool(t, p, 2*time.Minute, "the controller saw the edit", func(s stack.PoolState) bool { return s.Pool.Status.ObservedGeneration == s.Pool.Generation })
	}
	mc := stack.ManagementConfig("registry.example/haproxy@sha256:" + stack.FreshDigest())
	mc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	file := writeManifest(t, "management-config.yaml", mc)

	out, errOut, code := plugin(t, ns, "fleet", "forecast", "-f", file, "-o", "json")
	if code != cli.ExitNeverConverges {
		t.Fatalf("exit %d, want %d (a pool never converges)\n%s\n%s", code, cli.ExitNeverConverges, out, errOut)
	}
	r := forecastJSON(t, out)
	table, _, _ := plugin(t, ns, "fleet", "forecast", "-f", file)
	t.Logf("kubectl nodepool fleet forecast -f management-config.yaml\n%s", table)
	if len(r.Pools) != 6 {
		t.Fatalf("%d pools forecast, want 6:\n%s", len(r.Pools), out)
	}
	type want struct {
		when  string
		start time.Time
		hold  string
	}
	wants := []want{
		{"now", r.Now, ""},
		{"window", opens.UTC(), "outside its windows"},
		{"exclusion-end", exclusionEnd, "exclusion freeze"},
		{"deadline", r.Now.Add(time.Hour), "drift deadline"},
		{"pause-end", pauseEnd, "paused until"},
		{"never", time.Time{}, ""},
	}
	for i, p := range r.Pools {
		w := wants[i]
		if p.When != w.when {
			t.Errorf("%s: when %s, want %s: %+v", p.Pool, p.When, w.when, p)
			continue
		}
		if !strings.Contains(strings.Join(p.Holds, ";"), w.hold) {
			t.Errorf("%s: holds %v, want %q", p.Pool, p.Holds, w.hold)
		}
		if w.when == "never" {
			if p.End != nil || p.Rolls || !strings.Contains(p.Reason, "NewNodes") || len(r.Summary.Never) != 1 {
				t.Errorf("%s: %+v, never %v: want never, because of NewNodes", p.Pool, p, r.Summary.Never)
			}
			continue
		}
		if p.Start == nil || !near(*p.Start, w.start, 2*time.Minute) || p.End == nil || !p.Rolls {
			t.Errorf("%s: starts %v ends %v, want a rollout from %s", p.Pool, p.Start, p.End, w.start)
		}
		if !p.FromSettings || !strings.Contains(p.Takes, "declared settings") {
			t.Errorf("%s: takes %q (from settings %v): a new pool's history is too short", p.Pool, p.Takes, p.FromSettings)
		}
	}
	if len(r.Pools[0].Components) != 1 || r.Pools[0].Components[0].Component != "apiserver-proxy" || !r.Pools[0].Components[0].Rolls {
		t.Errorf("the Rollout pool's components %+v, want apiserver-proxy rolled", r.Pools[0].Components)
	}
	if c := r.Pools[5].Components; len(c) != 1 || c[0].Rolls {
		t.Errorf("the NewNodes pool's components %+v, want apiserver-proxy not rolled", c)
	}
	if pa := r.Summary.PoolsAt; len(pa) != 3 || pa[0].At == nil || pa[2].At != nil {
		t.Errorf("pools at %+v: want half by a time, all never", pa)
	}
	for _, p := range pools {
		got := &nodepoolv1.NodePool{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.PendingManagementChanges) != 0 {
			t.Errorf("%s reports drift after the forecast: %+v", p.Name, got.Status.PendingManagementChanges)
		}
	}
	live := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mc), live); err != nil || live.Data[inputs.ManagementConfigKey] == mc.Data[inputs.ManagementConfigKey] {
		t.Errorf("the live management config took the edit (%v)", err)
	}
}

// A FleetRollout over pools with windows is forecast, then run: pools
// with three restarts of history each, one with its window (Asia/Tokyo)
// open, one whose window (UTC) opens in four minutes, in waves [1, 100%]
// with a 30s soak. The forecast (kubectl nodepool fleet forecast
// --fleet-rollout) says when each wave starts and ends; the FleetRollout
// then created carries status.predictedCompletion while it runs; both are
// within 2 minutes of when the waves and the rollout actually end.
func TestAFleetRolloutsForecastIsWhatItThenDoes(t *testing.T) {
	const label = "forecast-fleet"
	pools := newFleetPools(t, label, 2, 2)
	ns := pools[0].Namespace
	for round := 1; round <= 3; round++ {
		for _, p := range pools {
			if out, errOut, code := plugin(t, ns, "rollout", "restart", p.Name); code != 0 {
				t.Fatalf("restart: %d %s %s", code, out, errOut)
			}
		}
		for _, p := range pools {
			st.WaitForPool(t, p, fleetTimeout, fmt.Sprintf("restart %d complete", round), func(s stack.PoolState) bool {
				h := st.HistoryOf(t, p)
				return len(h) >= round+1 && h[len(h)-1].Outcome == history.OutcomeComplete && stack.PoolSettled(1)(s)
			})
		}
	}
	now := time.Now().UTC()
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	open := now.In(tokyo).Add(-time.Hour)
	opens := now.Truncate(time.Minute).Add(4 * time.Minute)
	stack.Update(t, env.Client, pools[0], func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
			Schedule: fmt.Sprintf("%d %d * * *", open.Minute(), open.Hour()), Duration: metav1.Duration{Duration: 3 * time.Hour}, TimeZone: "Asia/Tokyo"}}}
	})
	stack.Update(t, env.Client, pools[1], func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{{
			Schedule: fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}}
	})
	bumpPlatform(t, pools)

	fr := &nodepoolv1.FleetRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "FleetRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: "fr-" + label},
		Spec: nodepoolv1.FleetRolloutSpec{
			PoolSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": label}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fleet-ns": label}},
			Waves:             []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("100%")},
			Soak:              &metav1.Duration{Duration: 30 * time.Second},
		},
	}
	out, errOut, code := plugin(t, "", "fleet", "forecast", "-A", "--fleet-rollout", writeManifest(t, "fleet-rollout.yaml", fr), "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	fc := forecastJSON(t, out)
	if len(fc.Waves) != 2 || fc.FleetEnd == nil || fc.Waves[1].Start == nil {
		t.Fatalf("forecast waves %+v end %v\n%s", fc.Waves, fc.FleetEnd, out)
	}
	for _, p := range fc.Pools {
		if p.FromSettings || p.Samples != 3 {
			t.Errorf("%s: from settings %v, %d samples: want from its 3 restarts; its records:%s", p.Pool, p.FromSettings, p.Samples, describeRecords(t, pools, p.Namespace, p.Pool))
		}
	}
	if fc.Waves[1].Start.Before(fc.Waves[0].End.Add(30 * time.Second)) {
		t.Errorf("forecast wave 2 starts %s, before wave 1 ends %s and soaks", fc.Waves[1].Start, fc.Waves[0].End)
	}
	fr.TypeMeta = metav1.TypeMeta{}
	created := newFleetRollout(t, label, func(f *nodepoolv1.FleetRollout) { f.Spec = fr.Spec })
	running := waitForFleet(t, created, 2*time.Minute, "a predicted completion", func(f *nodepoolv1.FleetRollout) bool {
		return f.Status.PredictedCompletion != nil
	})
	predicted := running.Status.PredictedCompletion.Time
	done := waitForFleet(t, created, fleetTimeout, "complete", phaseIs(nodepoolv1.FleetPhaseComplete))
	ended := done.Status.CompletedAt.Time
	t.Logf("forecast: waves %s–%s, %s–%s, end %s; status predicted %s; ran: waves %s–%s, %s–%s, end %s",
		fc.Waves[0].Start, fc.Waves[0].End, fc.Waves[1].Start, fc.Waves[1].End, fc.FleetEnd, predicted,
		done.Status.Waves[0].StartedAt, done.Status.Waves[0].CompletedAt, done.Status.Waves[1].StartedAt, done.Status.Waves[1].CompletedAt, ended)
	const bound = 2 * time.Minute
	if !near(ended, *fc.FleetEnd, bound) {
		t.Errorf("forecast to end at %s, ended at %s: more than %s off", fc.FleetEnd, ended, bound)
	}
	if !near(ended, predicted, bound) {
		t.Errorf("status.predictedCompletion %s, ended at %s: more than %s off", predicted, ended, bound)
	}
	for i, w := range done.Status.Waves {
		if !near(w.CompletedAt.Time, *fc.Waves[i].End, bound) {
			t.Errorf("wave %d forecast to end at %s, ended at %s", w.Wave, fc.Waves[i].End, w.CompletedAt)
		}
	}
	if s := done.Status.Waves[1].StartedAt; s == nil || done.Status.Waves[1].CompletedAt.Time.Before(opens) {
		t.Errorf("wave 2 completed at %s, before its pool's window opened at %s", done.Status.Waves[1].CompletedAt, opens)
	}
}

// describeRecords lists the history records of the pool named ns/name
// among pools, as the duration prediction reads them.
func describeRecords(t *testing.T, pools []*nodepoolv1.NodePool, ns, name string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range pools {
		if p.Namespace != ns || p.Name != name {
			continue
		}
		fmt.Fprintf(&b, "\n  status.revisions %v", st.Observe(t, p).Pool.Status.Revisions)
		for _, e := range st.HistoryOf(t, p) {
			_, usable := history.Past(e)
			fmt.Fprintf(&b, "\n  rev %d %s %s started %s completed %v machines %d rounds %d forcedAt %v usable %v",
				e.Revision, e.Initiator, e.Outcome, e.Started.Format(time.RFC3339Nano), e.Completed, e.Machines, e.Rounds, e.ForcedAt, usable)
		}
	}
	return b.String()
}
