package scenario

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

var seeds = flag.Int("seeds", 0, "how many random seeds to run (default 20, or NODEPOOL_SIM_SEEDS)")

func TestRandomInterleavings(t *testing.T) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("NODEPOOL_SIM_SEEDS")); err == nil && v > 0 {
		n = v
	}
	if *seeds > 0 {
		n = *seeds
	}
	for seed := int64(1); seed <= int64(n); seed++ {
		w := Random(seed, DefaultRandom)
		if err := w.RunFor(DefaultRandom.Length); err != nil {
			t.Errorf("seed %d: %v\n%s\nreplay: go test ./internal/scenario -run 'TestRandomSeed' -seed %d -v",
				seed, err, w.Trace(), seed)
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
	err := w.RunFor(DefaultRandom.Length)
	t.Log(w.Trace())
	if err != nil {
		t.Fatal(err)
	}
}
