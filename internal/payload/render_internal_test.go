package payload

import (
	"testing"

	"nodepool.dev/nodepool/internal/inputs"
)

// TestEveryComponentHasARenderer: a component added to the table without a
// fragment would make every Render fail.
func TestEveryComponentHasARenderer(t *testing.T) {
	for _, c := range inputs.Components() {
		if renderers[c] == nil {
			t.Errorf("component %s has no renderer", c)
		}
	}
	if len(renderers) != len(inputs.Components()) {
		t.Errorf("%d renderers for %d components", len(renderers), len(inputs.Components()))
	}
}
