package scenario

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

var seeds = flag.Int("seeds", 0, "how many random seeds to run (default 20, or NODEPOOL_SIM_SEEDS)")

// knownDefects are the invariants today's engine breaks in random worlds
// (the defects fixed on other branches): a seed that breaks only these is
// reported, not failed, unless NODEPOOL_SCENARIO_DEFECTS=1.
var knownDefects = map[string]string{
	"NoMoreThanCanaryOnAnUntestedPayload":      "the canary does not hold the rest of its round (health branch)",
	"AHaltHolds":                               "a halt is forgotten when the failed machine goes (health branch)",
	"AHaltedPoolBootsTheLastHealthyPayload":    "a halted pool boots the failing payload (health branch)",
	"DriftPastItsDeadlineIsAppliedInTheWindow": "the drift deadline restarts with each bump (drift deadline branch)",
	"FleetWavesComplete":                       "a fleet waits for its exact trigger (fleet branch)",
	"APersonsLaterRequestWins":                 "a fleet overwrites a person's apply-pending (fleet branch)",
}

func TestRandomInterleavings(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("NODEPOOL_SIM_SEEDS")); err == nil && v > 0 {
		n = v
	}
	if *seeds > 0 {
		n = *seeds
	}
	defects := os.Getenv("NODEPOOL_SCENARIO_DEFECTS") == "1"
	for seed := int64(1); seed <= int64(n); seed++ {
		w := Random(seed, DefaultRandom)
		if !defects {
			for name, why := range knownDefects {
				w.OptOut(name, why)
			}
		}
		if err := w.RunFor(DefaultRandom.Length); err != nil {
			t.Errorf("seed %d: %v\n%s\nreplay: NODEPOOL_SCENARIO_DEFECTS=%s go test ./internal/scenario -run 'TestRandomSeed' -seed %d -v",
				seed, err, w.Trace(), map[bool]string{true: "1", false: "0"}[defects], seed)
		}
	}
}

var seed = flag.Int64("seed", 0, "the one random seed TestRandomSeed replays")

// TestRandomSeed replays one seed with its trace (-seed N).
func TestRandomSeed(t *testing.T) {
	if *seed == 0 {
		t.Skip("replays one seed: -seed N")
	}
	w := Random(*seed, DefaultRandom)
	if os.Getenv("NODEPOOL_SCENARIO_DEFECTS") != "1" {
		for name, why := range knownDefects {
			w.OptOut(name, why)
		}
	}
	err := w.RunFor(DefaultRandom.Length)
	t.Log(w.Trace())
	if err != nil {
		t.Fatal(err)
	}
}
