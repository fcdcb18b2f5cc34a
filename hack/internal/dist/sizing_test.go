package dist

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// poolsServed is how the docs and the shipped values say how many pools
// the controller's memory limit serves: "some 4,000 pools".
var poolsServed = regexp.MustCompile(`some\s+(?:#\s+)?([0-9][0-9,]*)\s+(?:#\s+)?pools`)

// The README, docs/operations.md (its install step and its Sizing), the
// chart's values.yaml and config/manager/manager.yaml say the same number
// of pools for the shipped 512 Mi limit.
func TestSizingIsTheSameEverywhere(t *testing.T) {
	root := testRoot(t)
	// Each file and how many times it states the figure.
	files := map[string]int{
		"README.md":                   1,
		"docs/operations.md":          2,
		ChartDir + "/values.yaml":     1,
		"config/manager/manager.yaml": 1,
	}
	seen := map[string]string{}
	for f, n := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		ms := poolsServed.FindAllSubmatch(b, -1)
		if len(ms) != n {
			t.Errorf("%s says \"some N pools\" %d times, want %d", f, len(ms), n)
		}
		for _, m := range ms {
			seen[string(m[1])] = f
		}
	}
	if len(seen) != 1 {
		t.Errorf("the pools 512 Mi serves are not said alike: %v (figure: a file that says it)", seen)
	}
}
