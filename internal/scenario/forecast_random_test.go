package scenario

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

// The forecast of a pool says what the engine then does, over the random
// generator's pools (policies, windows in three time zones, exclusions,
// drift deadlines, health gates, InPlace, auto repair): each seed's pools
// get a platform change, some a person's apply-pending or a pause, and
// then nothing happens for longer than the forecast looks. The invariant
// TheForecastSaysWhenTheDriftIsApplied forecasts every waiting pool as
// `fleet forecast` does, from its objects alone, and fails when the
// engine starts the drift's rollout at another time, or not at all when
// the forecast said it would (random seeds with many actions rarely leave
// a forecast that long undisturbed: this test does).
func TestTheForecastSaysWhenRandomPoolsApplyTheirDrift(t *testing.T) {
	n := 40
	if v, err := strconv.Atoi(os.Getenv("NODEPOOL_SIM_FORECAST_SEEDS")); err == nil && v > 0 {
		n = v
	}
	made, borne := ForecastsMade.Load(), ForecastsConfirmed.Load()
	for seed := int64(1); seed <= int64(n); seed++ {
		w, d := forecastWorld(seed)
		w.NoTrace = true
		if err := w.RunFor(d); err != nil {
			w, d = forecastWorld(seed) // the same world again, traced
			err = w.RunFor(d)
			t.Errorf("seed %d: %v\n%s\n(replay: NODEPOOL_SIM_FORECAST_SEEDS=%d go test ./internal/scenario -run TestTheForecastSaysWhenRandomPools -v)", seed, err, w.Trace(), seed)
		}
	}
	t.Logf("%s", fmt.Sprintf("%d seeds: forecasts %d made, %d borne out; over the process: %s", n, ForecastsMade.Load()-made, ForecastsConfirmed.Load()-borne, ForecastCounts()))
	if ForecastsConfirmed.Load() == borne {
		t.Error("no forecast was borne out: the invariant checked nothing")
	}
}

// forecastWorld is seed's world of TestTheForecastSaysWhenRandomPools and
// how long it runs.
func forecastWorld(seed int64) (*World, time.Duration) {
	w := Random(seed, RandomOptions{Pools: 3, Length: time.Hour, Health: true, Windows: true})
	w.CheckForecasts = true
	r := rand.New(rand.NewSource(seed))
	at := w.Now.Add(time.Duration(1+r.Intn(12)) * time.Hour)
	w.At(at, "platform bumps the proxy defaults to pd"+strconv.FormatInt(seed, 10), func(w *World) {
		for _, q := range w.pools {
			q.Inputs.Platform[CompProxyDefaults] = "pd" + strconv.FormatInt(seed, 10)
		}
	})
	for _, p := range w.pools {
		switch r.Intn(4) {
		case 0:
			w.At(at.Add(time.Duration(r.Intn(120))*time.Minute), "person runs apply-pending on "+p.Name, func(*World) { ApplyPending(p, "") })
		case 1:
			d := time.Duration(1+r.Intn(30)) * time.Hour
			w.At(at.Add(time.Duration(r.Intn(120))*time.Minute), "owner pauses "+p.Name+" for "+d.String(), func(w *World) {
				p.Obj.Spec.Management.PausedUntil = w.Now.Add(d).UTC().Format(time.RFC3339)
			})
		}
	}
	return w, at.Sub(w.Now) + 2*time.Hour + forecastHorizon + time.Hour
}
