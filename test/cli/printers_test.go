package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
)

// -o name and -o jsonpath print what kubectl's printers print, for a pool's
// rollout status, the fleet, the history and a FleetRollout's status;
// -o wide shows every fleet column.
func TestKubectlPrintersOnTheRealStack(t *testing.T) {
	ns := newNamespace(t)
	workers := newPool(t, ns, "workers", 1, func(p *nodepoolv1.NodePool) { p.Labels = map[string]string{"fleet": "cli-printers"} })
	web := newPool(t, ns, "web", 1, nil)
	waitFor(t, workers, rolloutTimeout, "workers ready", settled(1))
	waitFor(t, web, rolloutTimeout, "web ready", settled(1))

	if out := ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "name"); out != "nodepool.nodepool.dev/workers\n" {
		t.Errorf("rollout status -o name = %q", out)
	}
	if out := ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "jsonpath={.phase} {.upToDate}/{.desired}"); out != "Complete 1/1" {
		t.Errorf("rollout status -o jsonpath = %q", out)
	}
	if out := ok(t, ns, "fleet", "-o", "name"); out != "nodepool.nodepool.dev/web\nnodepool.nodepool.dev/workers\n" {
		t.Errorf("fleet -o name = %q", out)
	}
	if out := ok(t, ns, "fleet", "-o", "jsonpath={[*].pool}"); out != "web workers" {
		t.Errorf("fleet -o jsonpath={[*].pool} = %q", out)
	}
	if out := ok(t, ns, "fleet", "-o", `jsonpath={range [*]}{.pool}={.ready}{"\n"}{end}`); out != "web=1\nworkers=1\n" {
		t.Errorf("fleet -o jsonpath={range ...} = %q", out)
	}
	wide := ok(t, ns, "fleet", "-o", "wide")
	if !regexp.MustCompile(`OLDEST-DRIFT\s+MANAGEMENT-UPDATES\s+NEXT-WINDOW\s+DRIFT-DEADLINE\s+FLEET-ROLLOUT\s+RUNS-LATEST\s+DRAINS\n`).MatchString(wide) ||
		!regexp.MustCompile(`(?m)^`+ns+`\s+workers\s`).MatchString(wide) {
		t.Errorf("fleet -o wide:\n%s", wide)
	}
	if out := ok(t, ns, "rollout", "history", "workers", "-o", "jsonpath={[0].revision}"); out != "1" {
		t.Errorf("rollout history -o jsonpath = %q", out)
	}

	// A FleetRollout, paused (it triggers nothing), of this namespace only.
	cleanupFleetRollout(t, "cli-printers")
	if out := ok(t, "", "fleet", "rollout", "cli-printers", "--selector", "fleet=cli-printers", "--namespace-selector", "kubernetes.io/metadata.name="+ns, "--paused", "-o", "name"); out != "fleetrollout.nodepool.dev/cli-printers\n" {
		t.Errorf("fleet rollout -o name = %q", out)
	}
	if out := ok(t, "", "fleet", "rollout", "status", "cli-printers", "--watch=false", "-o", "name"); out != "fleetrollout.nodepool.dev/cli-printers\n" {
		t.Errorf("fleet rollout status -o name = %q", out)
	}
	if out := ok(t, "", "fleet", "rollout", "status", "cli-printers", "--watch=false", "-o", "jsonpath={.name}"); out != "cli-printers" {
		t.Errorf("fleet rollout status -o jsonpath={.name} = %q", out)
	}
}

// A request the API server refuses (RBAC: an impersonated user with no
// role), an object that is not there, and a server that does not answer
// exit 5, not a rollout outcome.
func TestCannotAskExitsFive(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "workers ready", settled(1))

	for _, args := range [][]string{
		{"--as", "nobody@example.com", "fleet"},
		{"--as", "nobody@example.com", "rollout", "status", "workers"},
		{"--as", "nobody@example.com", "rollout", "pause", "workers"},
		{"--as", "nobody@example.com", "fleet", "rollout", "status", "any"},
	} {
		r := fails(t, ns, cli.ExitUnreachable, args...)
		if !strings.Contains(r.err, "forbidden") || !strings.Contains(r.err, "nobody@example.com") {
			t.Errorf("%s: %s", strings.Join(args, " "), r.err)
		}
	}
	if r := fails(t, ns, cli.ExitUnreachable, "rollout", "status", "nope"); !strings.Contains(r.err, "NodePool "+ns+"/nope not found") {
		t.Errorf("rollout status of a pool that is not there: %s", r.err)
	}
	if r := fails(t, "", cli.ExitUnreachable, "fleet", "rollout", "status", "nope"); !strings.Contains(r.err, "not found") {
		t.Errorf("fleet rollout status of one that is not there: %s", r.err)
	}
	if r := fails(t, ns, cli.ExitUnreachable, "--server", "https://127.0.0.1:1", "fleet"); !strings.Contains(r.err, "127.0.0.1:1") {
		t.Errorf("fleet against a server that does not listen: %s", r.err)
	}
	// A revision the record does not hold is a refusal (1), not 5.
	if r := fails(t, ns, cli.ExitFailure, "rollout", "undo", "workers", "--to-revision", "9"); !strings.Contains(r.err, "revision 9") {
		t.Errorf("undo to a revision not recorded: %s", r.err)
	}
}

// Completion asks the cluster: the pools of the namespace (-n, or the
// kubeconfig context's), the FleetRollouts, the revisions of a pool; run
// as kubectl runs it, through kubectl_complete-nodepool and the built
// plugin.
func TestCompletionNamesComeFromTheCluster(t *testing.T) {
	ns := newNamespace(t)
	workers := newPool(t, ns, "workers", 1, nil)
	newPool(t, ns, "web", 1, nil)
	waitFor(t, workers, rolloutTimeout, "workers ready", settled(1))
	cleanupFleetRollout(t, "cli-complete")
	ok(t, "", "fleet", "rollout", "cli-complete", "--selector", "fleet=none", "--namespace-selector", "kubernetes.io/metadata.name="+ns, "--paused")

	complete := func(ns string, args ...string) []string {
		t.Helper()
		return completions(t, ok(t, ns, append([]string{"__complete"}, args...)...))
	}
	if got := complete(ns, "rollout", "status", ""); strings.Join(got, " ") != "web workers" {
		t.Errorf("rollout status <TAB> = %q", got)
	}
	if got := complete(ns, "diff", "wo"); strings.Join(got, " ") != "workers" {
		t.Errorf("diff wo<TAB> = %q", got)
	}
	if got := complete(ns, "rollout", "status", "workers", ""); len(got) != 0 {
		t.Errorf("rollout status workers <TAB> = %q: it takes one pool", got)
	}
	if got := complete("", "fleet", "rollout", "status", "cli-comp"); strings.Join(got, " ") != "cli-complete" {
		t.Errorf("fleet rollout status cli-comp<TAB> = %q", got)
	}
	if got := complete(ns, "rollout", "undo", "workers", "--to-revision", ""); len(got) != 1 || !strings.HasPrefix(got[0], "1\t") {
		t.Errorf("rollout undo workers --to-revision <TAB> = %q", got)
	}
	if got := complete(ns, "rollout", "history", "workers", "--revision", ""); len(got) != 1 || !strings.HasPrefix(got[0], "1\t") {
		t.Errorf("rollout history workers --revision <TAB> = %q", got)
	}
	if got := complete(ns, "fleet", "-n", ns[:len(ns)-1]); !contains(got, ns) {
		t.Errorf("-n %s<TAB> = %q", ns[:len(ns)-1], got)
	}
	// Not allowed: nothing, and no file names.
	if out := ok(t, ns, "__complete", "--as", "nobody@example.com", "rollout", "status", ""); out != ":4\n" {
		t.Errorf("completion as a user who may not list pools printed %q, want only :4 (no file completion)", out)
	}

	// As kubectl runs it: kubectl_complete-nodepool on the PATH, the
	// namespace from the kubeconfig's context.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-nodepool"), "nodepool.dev/nodepool/cmd/kubectl-nodepool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-nodepool: %v\n%s", err, out)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "cmd", "kubectl-nodepool", "kubectl_complete-nodepool"))
	if err != nil {
		t.Fatal(err)
	}
	kc, err := st.WriteKubeconfig("kubeconfig-complete-"+ns, ns)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "rollout", "history", "w")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kc)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl_complete-nodepool rollout history w: %v\n%s", err, out)
	}
	if got := completions(t, string(out)); strings.Join(got, " ") != "web workers" {
		t.Errorf("kubectl_complete-nodepool rollout history w = %q\n%s", got, out)
	}
}

// completions are the candidates cobra's __complete printed, before its
// ":<directive>" line, which must say no file completion (4).
func completions(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != ":4" && lines[len(lines)-1] != ":36" {
		t.Fatalf("__complete printed %q: no :4 (ShellCompDirectiveNoFileComp) at the end", out)
	}
	return lines[:len(lines)-1]
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
