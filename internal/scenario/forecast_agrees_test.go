package scenario

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout/poolmath"
)

// A forecast agrees with itself: a pool's end is its start plus the
// predicted duration it prints (TAKES: Prediction.Likely), and lies in
// its own [endLow, endHigh], whether its rollouts take seconds (5–7s: the
// forecast said start + 60s, outside both), minutes or hours, with a
// health gate or without, from history or from the declared settings.
func TestAForecastsEndIsItsStartPlusWhatItSaysItTakes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		machines int32
		health   bool
		took     []time.Duration // its history, newest first
	}{
		{name: "5 nodes rolled in 5-7s", machines: 5, took: []time.Duration{5 * time.Second, 6 * time.Second, 7 * time.Second}},
		{name: "1 node rolled in 2-3s", machines: 1, took: []time.Duration{2 * time.Second, 3 * time.Second, 2 * time.Second}},
		{name: "3 nodes rolled in 9-15m", machines: 3, took: []time.Duration{9 * time.Minute, 12 * time.Minute, 15 * time.Minute}},
		{name: "4 health-gated nodes rolled in 40-50m", machines: 4, health: true, took: []time.Duration{40 * time.Minute, 45 * time.Minute, 50 * time.Minute, 41 * time.Minute}},
		{name: "2 nodes, no history", machines: 2},
		{name: "5 nodes rolled once in 16s", machines: 5, took: []time.Duration{16 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers"}}
			np.Spec.ClusterName, np.Spec.Replicas, np.Spec.Release.Version = "c", ptr.To(tc.machines), "v1.36.3"
			np.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			if tc.health {
				np.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 10 * time.Minute},
					Soak: &metav1.Duration{Duration: 2 * time.Minute}, FailurePolicy: nodepoolv1.FailurePolicyHalt}
			}
			shape, ok := poolmath.ShapeOf(&np.Spec, tc.machines, tc.machines)
			if !ok {
				t.Fatal("no shape")
			}
			fp := ForecastPool{Pool: np, Machines: tc.machines, Change: []ForecastChange{{Component: inputs.ProxyDefaults}}}
			for _, d := range tc.took {
				fp.Past = append(fp.Past, poolmath.PastRollout{Shape: shape, Took: d, Complete: true})
			}
			fc := RunForecast(ForecastInput{Now: t0, Horizon: 2 * 24 * time.Hour, Pools: []ForecastPool{fp}})
			f := fc.Pools[0]
			if f.Start == nil || f.End == nil || f.EndLow == nil || f.EndHigh == nil {
				t.Fatalf("forecast %+v, notes %v: want a start, an end and its spread", f, fc.Notes)
			}
			t.Logf("start %s, end +%s in [+%s, +%s]; takes %s", f.Start.Format(time.RFC3339), f.End.Sub(*f.Start), f.EndLow.Sub(*f.Start), f.EndHigh.Sub(*f.Start), f.Prediction.Likely)
			if f.End.Before(*f.EndLow) || f.End.After(*f.EndHigh) {
				t.Errorf("end %s outside its own [%s, %s]", f.End, f.EndLow, f.EndHigh)
			}
			if took := f.End.Sub(*f.Start); took != f.Prediction.Likely {
				t.Errorf("end is start + %s, it says it takes %s", took, f.Prediction.Likely)
			}
			if n := len(f.NodeTimes); n != int(tc.machines) || f.NodeTimes[n-1].After(*f.End) || f.NodeTimes[0].Before(*f.Start) {
				t.Errorf("node times %v, want %d between start and end", f.NodeTimes, tc.machines)
			}
			if got := fc.PoolsAt[100]; got == nil || !got.Equal(*f.End) {
				t.Errorf("the fleet's 100%% is %v, want the pool's end %s", got, f.End)
			}
			_ = fmt.Sprint()
		})
	}
}

// A young pool with more pools like it than poolmath.MaxPeers reads the
// nearest in machine count: of 40 pools each of 3 to 7 machines with a
// history, a 5-machine pool reads the 40 of 5 and 24 of 4 or 6.
func TestAYoungPoolReadsThePoolsNearestInSize(t *testing.T) {
	var pools []ForecastPool
	for machines := int32(3); machines <= 7; machines++ {
		for i := range 40 {
			np := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("p%d-%d", machines, i)}}
			shape := poolmath.Shape{Machines: machines, Rounds: machines}
			past := []poolmath.PastRollout{{Shape: shape, Took: time.Minute, Complete: true}, {Shape: shape, Took: time.Minute, Complete: true}, {Shape: shape, Took: time.Minute, Complete: true}}
			pools = append(pools, ForecastPool{Pool: np, Machines: machines, Past: past})
		}
	}
	young := ForecastPool{Pool: &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "young"}}, Machines: 5}
	like := peerIndexOf(append(pools, young)).like(young)
	fives, near := 0, 0
	for _, pt := range like {
		switch pt.Machines {
		case 5:
			fives++
		case 4, 6:
			near++
		}
	}
	if len(like) != poolmath.MaxPeers || fives != 40 || near != poolmath.MaxPeers-40 {
		t.Errorf("%d pools like it, %d of 5 machines, %d of 4 or 6: want %d, 40 and %d", len(like), fives, near, poolmath.MaxPeers, poolmath.MaxPeers-40)
	}
}
