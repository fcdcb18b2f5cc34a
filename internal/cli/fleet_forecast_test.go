package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
	"nodepool.dev/nodepool/internal/scenario"
)

// The forecast's table says per pool when it rolls and from what its
// duration is known, then the fleet's shares, and names the pool that
// never runs the change, with why.
func TestTheForecastTableSaysWhenEachPoolRunsItAndWhichNeverWill(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	pool := func(name string, policy nodepoolv1.ManagementUpdatePolicy) *nodepoolv1.NodePool {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
		p.Spec.ClusterName, p.Spec.Replicas, p.Spec.Release.Version = "c", ptr.To[int32](3), "v1.36.3"
		p.Spec.Management.ManagementUpdates = policy
		return p
	}
	past := []poolmath.PastRollout{}
	for _, took := range []time.Duration{9 * time.Minute, 12 * time.Minute, 15 * time.Minute} {
		past = append(past, poolmath.PastRollout{Shape: poolmath.Shape{Machines: 3, Rounds: 3}, Took: took, Complete: true})
	}
	change := []scenario.ForecastChange{{Component: inputs.APIServerProxy}}
	in := scenario.ForecastInput{Now: now, Horizon: 10 * 24 * time.Hour, Pools: []scenario.ForecastPool{
		{Pool: pool("api", nodepoolv1.ManagementUpdatesRollout), Machines: 3, Past: past, Change: change},
		{Pool: pool("legacy", nodepoolv1.ManagementUpdatesOnNextRollout), Machines: 3, Change: change},
	}}
	r := forecastResult(scenario.RunForecast(in))
	var out bytes.Buffer
	if err := printForecast(&Options{IOStreams: genericiooptions.IOStreams{Out: &out}}, r); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Log(got)
	for _, want := range []string{
		"apiserver-proxy(pinned)", "now 2026-12-03 10:00Z", "12m (from 3 rollouts, 9m–15m)",
		"Pools (2) running the new payload: 50% 2026-12-03 10:1", "100% never",
		"Never without action: team-a/legacy: managementUpdates: OnNextRollout",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if r.Pools[0].FromSettings || r.Pools[0].Samples != 3 || r.Pools[1].When != scenario.WhenNever || len(r.Summary.Never) != 1 {
		t.Errorf("forecast %+v", r)
	}
}

// The JSON's end is its start plus what TAKES says, inside its own
// [endLow, endHigh], for a pool whose rollouts take 5–7s (it was start +
// 60s), one that rolls in minutes, and a young one (one rollout of
// history) predicted from the two pools like it, which TAKES names.
func TestTheForecastsEndIsWhatItsTakesSays(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var in scenario.ForecastInput
	in.Now, in.Horizon = now, 24*time.Hour
	for i, tooks := range [][]time.Duration{{5 * time.Second, 6 * time.Second, 7 * time.Second}, {9 * time.Minute, 12 * time.Minute, 15 * time.Minute}, {16 * time.Second}} {
		p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("pool-%d", i)}}
		p.Spec.ClusterName, p.Spec.Replicas, p.Spec.Release.Version = "c", ptr.To[int32](5), "v1.36.3"
		p.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "DockerMachineTemplate", APIGroup: "infrastructure.cluster.x-k8s.io", Name: "workers"}
		p.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
		shape, _ := poolmath.ShapeOf(&p.Spec, 5, 5)
		fp := scenario.ForecastPool{Pool: p, Machines: 5, Change: []scenario.ForecastChange{{Component: inputs.APIServerProxy}}}
		for _, took := range tooks {
			fp.Past = append(fp.Past, poolmath.PastRollout{Shape: shape, Took: took, Complete: true})
		}
		in.Pools = append(in.Pools, fp)
	}
	r := forecastResult(scenario.RunForecast(in))
	for _, p := range r.Pools {
		if p.Start == nil || p.End == nil || p.EndLow == nil || p.EndHigh == nil {
			t.Fatalf("%s: %+v, want a start, an end and its spread", p.Pool, p)
		}
		took := p.End.Sub(*p.Start)
		t.Logf("%s: end start+%s in [%s, %s], takes %q", p.Pool, took, p.EndLow.Sub(*p.Start), p.EndHigh.Sub(*p.Start), p.Takes)
		if p.End.Before(*p.EndLow) || p.End.After(*p.EndHigh) {
			t.Errorf("%s: end %s outside its [%s, %s]", p.Pool, p.End, p.EndLow, p.EndHigh)
		}
		if !strings.HasPrefix(p.Takes, short(took)+" ") {
			t.Errorf("%s: end is start + %s, TAKES says %q", p.Pool, short(took), p.Takes)
		}
	}
	young := r.Pools[2]
	if want := "(from 2 pools like it (DockerMachineTemplate of infrastructure.cluster.x-k8s.io, Replace, 5 machines), "; !strings.Contains(young.Takes, want) ||
		!strings.HasSuffix(young.Takes, "; history: 1 rollouts, fewer than 3)") || young.Peers != 2 || young.FromSettings {
		t.Errorf("young pool: takes %q peers %d fromSettings %v, want from the 2 pools like it", young.Takes, young.Peers, young.FromSettings)
	}
}
