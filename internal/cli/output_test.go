package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"nodepool.dev/nodepool/internal/version"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	return out.String(), errOut.String(), code
}

func TestVersionPrintsJSONAndYAML(t *testing.T) {
	out, errOut, code := run(t, "version", "-o", "json")
	if code != 0 {
		t.Fatalf("version -o json: exit %d: %s", code, errOut)
	}
	var got version.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	if got != version.Get() {
		t.Errorf("version -o json = %+v, want %+v", got, version.Get())
	}
	if out, _, _ := run(t, "version", "-o", "yaml"); !strings.Contains(out, "goVersion: "+version.Get().GoVersion+"\n") {
		t.Errorf("version -o yaml:\n%s", out)
	}
	if out, _, _ := run(t, "version", "-o", "jsonpath={.platform}"); out != version.Get().Platform {
		t.Errorf("version -o jsonpath={.platform} = %q, want %q", out, version.Get().Platform)
	}
	if out, _, _ := run(t, "version"); out != version.Get().String() {
		t.Errorf("version prints %q, want the text %q", out, version.Get().String())
	}
	if _, errOut, code := run(t, "version", "-o", "name"); code != ExitFailure || !strings.Contains(errOut, "-o name: this command's result names no object") {
		t.Errorf("version -o name: exit %d: %s", code, errOut)
	}
}

func TestOutputRefusesUnknownFormatsNamingTheAllowedOnes(t *testing.T) {
	_, errOut, code := run(t, "fleet", "-o", "xml")
	if code != ExitFailure {
		t.Errorf("-o xml: exit %d, want %d", code, ExitFailure)
	}
	for _, want := range []string{`--output "xml" is not supported: use table, wide, `, "jsonpath", "name", "json", "yaml"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("-o xml says %q, without %q", errOut, want)
		}
	}
	if _, errOut, code := run(t, "fleet", "-o", "jsonpath={.items[}"); code != ExitFailure || !strings.Contains(errOut, "error parsing jsonpath") {
		t.Errorf("a bad jsonpath: exit %d: %s", code, errOut)
	}
}

// A server that does not answer, and the API server's 401, 403 and 404,
// exit 5: the command could not ask, which no rollout outcome means.
func TestExitCodeOfAClusterThatCannotBeAsked(t *testing.T) {
	gr := schema.GroupResource{Group: "nodepool.dev", Resource: "nodepools"}
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("reading NodePool a/b: %w", apierrors.NewForbidden(gr, "b", fmt.Errorf("RBAC"))), ExitUnreachable},
		{fmt.Errorf("listing: %w", apierrors.NewUnauthorized("who are you")), ExitUnreachable},
		{apierrors.NewNotFound(gr, "b"), ExitUnreachable},
		{fmt.Errorf("listing: %w", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")}), ExitUnreachable},
		{apierrors.NewInvalid(schema.GroupKind{Group: "nodepool.dev", Kind: "NodePool"}, "b", nil), ExitFailure},
		{fmt.Errorf("--sort-by %q: use one of name", "size"), ExitFailure},
		{&ExitError{Code: ExitStalled, Err: fmt.Errorf("stalled")}, ExitStalled},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}

	// A kubeconfig whose server does not listen.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]
current-context: c
`, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fleet"}, {"rollout", "status", "workers"}, {"rollout", "history", "workers"}, {"fleet", "rollout", "status", "waves"}} {
		_, errOut, code := run(t, append([]string{"--kubeconfig", kc, "--request-timeout", "5s"}, args...)...)
		if code != ExitUnreachable || !strings.Contains(errOut, addr) {
			t.Errorf("%s against a server that does not listen: exit %d, want %d: %s", strings.Join(args, " "), code, ExitUnreachable, errOut)
		}
	}
	// No kubeconfig at all.
	if _, errOut, code := run(t, "--kubeconfig", filepath.Join(t.TempDir(), "none"), "fleet"); code != ExitUnreachable {
		t.Errorf("fleet with a kubeconfig that is not there: exit %d, want %d: %s", code, ExitUnreachable, errOut)
	}
}

// Every command's --help lists its exit codes, the shared 5 among them;
// plan's says 4 is a blocking drain.
func TestEveryCommandDocumentsItsExitCodes(t *testing.T) {
	root := NewCommand(genericiooptions.NewTestIOStreamsDiscard())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || strings.HasPrefix(c.Name(), "__") || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if !strings.Contains(c.Long, "\nExit codes:\n  0  ") {
			t.Errorf("%q --help lists no exit codes:\n%s", c.CommandPath(), c.Long)
		}
		if c.Name() != "version" && !strings.Contains(c.Long, "\n  5  the API server cannot be reached") {
			t.Errorf("%q --help does not say exit 5", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out, _, code := run(t, "plan", "--help")
	if code != 0 || !strings.Contains(out, "\n  4  a drain of a predicted rollout is predicted to block") || !strings.Contains(out, "\n  1  a pool is refused") {
		t.Errorf("plan --help:\n%s", out)
	}
	for key := range exitCodeLines {
		if key == "" {
			continue
		}
		if c, _, err := root.Find(strings.Fields(key)); err != nil || commandKey(c) != key {
			t.Errorf("exit codes for %q, which is no command", key)
		}
	}
}

// Flags with a fixed set of values complete those starting with what is
// typed, and never file names.
func TestFixedValuesComplete(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "fleet", "--sort-by", "drift"}, "drift\ndrift-age\n:4\n"},
		{[]string{"__complete", "diff", "workers", "--against", ""}, "new-node\nlatest\n:4\n"},
		{[]string{"__complete", "fleet", "-o", "js"}, "json\njsonpath\njsonpath-as-json\njsonpath-file\n:4\n"},
		{[]string{"__complete", "fleet", "rollout", "x", "--action", "re"}, "restart\n:4\n"},
	} {
		if out, errOut, code := run(t, c.args...); code != 0 || out != c.want {
			t.Errorf("%s: exit %d, printed %q, want %q (%s)", strings.Join(c.args, " "), code, out, c.want, errOut)
		}
	}
}

// plan words an admission refusal of the edited pool as refused (exit 1);
// the authorizer's refusal (RBAC) is exit 5.
func TestPlanTellsRBACFromAdmission(t *testing.T) {
	gr := schema.GroupResource{Group: "nodepool.dev", Resource: "nodepools"}
	rbac := apierrors.NewForbidden(gr, "workers", fmt.Errorf(`User "nobody@example.com" cannot update resource "nodepools" in API group "nodepool.dev" in the namespace "team-a"`))
	admission := apierrors.NewForbidden(gr, "workers", fmt.Errorf(`ValidatingAdmissionPolicy 'nodepool-spec' with binding 'nodepool-spec' denied request: spec.replicas must be at most 100`))
	if !rbacDenied(rbac) || exitCode(rbac) != ExitUnreachable {
		t.Errorf("%v: rbacDenied %v, exit %d", rbac, rbacDenied(rbac), exitCode(rbac))
	}
	if rbacDenied(admission) {
		t.Errorf("%v is taken for RBAC's", admission)
	}
}
