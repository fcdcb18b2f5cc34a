package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kubectl runs kubectl_complete-nodepool with the words after `nodepool`,
// the word being completed last (empty after a space); the script hands
// them, unchanged, to the plugin's __complete.
func TestCompletionScriptHandsTheWordsToThePlugin(t *testing.T) {
	script, err := filepath.Abs("kubectl_complete-nodepool")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(script)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("%s is mode %v: kubectl runs only an executable", script, st.Mode().Perm())
	}
	dir := t.TempDir()
	stub := "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl-nodepool"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "rollout", "status", "-n", "team a", "")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	if want := "[__complete]\n[rollout]\n[status]\n[-n]\n[team a]\n[]\n"; string(out) != want {
		t.Errorf("the plugin got\n%s\nwant\n%s", out, want)
	}
	if b, _ := os.ReadFile(script); !strings.HasPrefix(string(b), "#!/bin/sh\n") {
		t.Errorf("%s does not start with #!/bin/sh", script)
	}
}

// The plugin is its own binary: it links the rollout engine it predicts
// with, not the server side (the controller, Cluster API's controllers,
// the sim, the payload server, the development environment).
func TestThePluginLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "nodepool.dev/nodepool/internal/cli") {
		t.Fatalf("go list -deps listed %d packages, without internal/cli: not the plugin's", len(deps))
	}
	forbidden := []string{
		"nodepool.dev/nodepool/internal/controller",
		"nodepool.dev/nodepool/internal/sim",
		"nodepool.dev/nodepool/internal/payloadserver",
		"nodepool.dev/nodepool/internal/devenv",
		"nodepool.dev/nodepool/internal/capi",
		"nodepool.dev/nodepool/internal/k8sbin",
		"sigs.k8s.io/cluster-api/internal",
		"sigs.k8s.io/cluster-api/controllers",
		"sigs.k8s.io/cluster-api/exp",
		"sigs.k8s.io/controller-runtime/pkg/manager",
		"sigs.k8s.io/controller-runtime/pkg/envtest",
		"go.etcd.io/etcd",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("the plugin links %s", d)
			}
		}
	}
}
