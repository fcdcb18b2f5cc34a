package rollout_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// clientPackages are the packages (and the trees under them) that talk to
// an API server; the engine decides from values and must reach none of
// them, even indirectly.
var clientPackages = []string{
	"sigs.k8s.io/controller-runtime/pkg/client",
	"sigs.k8s.io/controller-runtime/pkg/cache",
	"sigs.k8s.io/controller-runtime/pkg/manager",
	"k8s.io/client-go",
}

func TestTheEngineImportsNoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = "go"
	}
	out, err := exec.Command(goBin, "list", "-deps", "nodepool.dev/nodepool/internal/rollout").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, p := range clientPackages {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				t.Errorf("internal/rollout depends on %s: move the I/O out of the package that brings it in (go list -deps -f '{{.ImportPath}}: {{.Imports}}' shows which)", dep)
			}
		}
	}
}
