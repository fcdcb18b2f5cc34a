package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

const (
	clusterName    = "c1"
	rolloutTimeout = 2 * time.Minute
)

// result is what one run of the plugin printed and returned.
type result struct {
	out, err string
	code     int
}

// kubectl runs `kubectl nodepool args...` in-process against the stack,
// with -n ns unless ns is empty.
func kubectl(t *testing.T, ns string, args ...string) result {
	t.Helper()
	full := []string{"--kubeconfig", kubeconfig}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cli.Run(context.Background(), streams, append(full, args...))
	return result{out: out.String(), err: errOut.String(), code: code}
}

// ok runs the plugin and fails the test unless it exits 0.
func ok(t *testing.T, ns string, args ...string) string {
	t.Helper()
	r := kubectl(t, ns, args...)
	if r.code != 0 {
		t.Fatalf("kubectl nodepool %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.out, r.err)
	}
	return r.out
}

// fails runs the plugin and fails the test unless it exits with code.
func fails(t *testing.T, ns string, code int, args ...string) result {
	t.Helper()
	r := kubectl(t, ns, args...)
	if r.code != code {
		t.Fatalf("kubectl nodepool %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.out, r.err)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not the expected JSON: %v\n%s", err, s)
	}
	return v
}

// newNamespace creates a namespace with a Cluster, its control plane and a
// machine template "small", deleted when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := st.Env.NewNamespace(t)
	ctx := context.Background()
	if err := stack.CreateCluster(ctx, st.Env.Client, ns, clusterName); err != nil {
		t.Fatal(err)
	}
	if err := stack.CreateTemplate(ctx, st.Env.Client, ns, "small"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, stack.ConfigMap(ns, "chrony", stack.Chrony("time.corp.example")))
	return ns
}

// newPool creates a NodePool of n machines with the user config chrony.
func newPool(t *testing.T, ns, name string, n int32, edit func(p *nodepoolv1.NodePool)) *nodepoolv1.NodePool {
	t.Helper()
	p := poolSpec(ns, name, n)
	if edit != nil {
		edit(p)
	}
	mustCreate(t, p)
	return p
}

func poolSpec(ns, name string, n int32) *nodepoolv1.NodePool {
	return &nodepoolv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nodepoolv1.NodePoolSpec{
			ClusterName:               clusterName,
			Replicas:                  ptr.To(n),
			Release:                   nodepoolv1.Release{Version: "v1.36.3"},
			Config:                    []nodepoolv1.LocalObjectReference{{Name: "chrony"}},
			InfrastructureTemplateRef: stack.TemplateRef("small"),
		},
	}
}

func mustCreate(t *testing.T, o client.Object) {
	t.Helper()
	if err := st.Env.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// update reads o, applies change and writes it back, retrying conflicts.
func update[T client.Object](t *testing.T, o T, change func(T)) {
	t.Helper()
	for range 20 {
		if err := st.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		change(o)
		err := st.Env.Client.Update(context.Background(), o)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not update %s", o.GetName())
}

// setProxyImage changes the platform's API-server proxy image (shared by
// every pool of the run): a management change.
func setProxyImage(t *testing.T, digestChar string) {
	t.Helper()
	update(t, stack.ManagementConfig(""), func(cm *corev1.ConfigMap) {
		cm.Data[inputs.ManagementConfigKey] = "apiServerProxyImage: registry.example/haproxy@sha256:" + strings.Repeat(digestChar, 64) + "\n"
	})
}

// state is a pool as the cluster shows it.
type state struct {
	pool     *nodepoolv1.NodePool
	machines sets.Set[string]
}

func observe(t *testing.T, p *nodepoolv1.NodePool) state {
	t.Helper()
	ctx := context.Background()
	s := state{pool: &nodepoolv1.NodePool{}, machines: sets.New[string]()}
	if err := st.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), s.pool); err != nil {
		t.Fatal(err)
	}
	ms := &clusterv1.MachineList{}
	if err := st.Env.Client.List(ctx, ms, client.InNamespace(p.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: p.Name}); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Items {
		if m.DeletionTimestamp.IsZero() {
			s.machines.Insert(string(m.UID))
		}
	}
	return s
}

func waitFor(t *testing.T, p *nodepoolv1.NodePool, timeout time.Duration, what string, cond func(state) bool) state {
	t.Helper()
	return stack.WaitFor(t, timeout, what, func() state { return observe(t, p) }, cond,
		func(s state) string { return fmt.Sprintf("%d machines, status %+v", s.machines.Len(), s.pool.Status) })
}

// settled: the controller says the pool of n machines is settled
// (stack.Settled), and n machines exist.
func settled(n int) func(state) bool {
	return func(s state) bool {
		return stack.Settled(s.pool, n) && s.machines.Len() == n
	}
}

func hasDrift(component string) func(state) bool {
	return func(s state) bool {
		for _, r := range s.pool.Status.PendingManagementChanges {
			if r.Component == component {
				return true
			}
		}
		return false
	}
}

// Normalisation of output for golden files: what changes from run to run
// (namespace names, hashes, digests, times, ages) becomes a placeholder, and
// tables are re-aligned after it.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<hash>"},
	{regexp.MustCompile(`sha256:[0-9a-f]{16}\b`), "sha256:<digest>"},
	{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<short>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "<time>"},
	{regexp.MustCompile(`\b\d+(y|d|h|m|s)(\d+(d|h|m|s))?\b`), "<age>"},
}

func normalise(s, ns string) string {
	if ns != "" {
		s = strings.ReplaceAll(s, ns, "<ns>")
	}
	for _, n := range normalisers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return realign(s)
}

var (
	tableHeader = regexp.MustCompile(`^\s*[A-Z][A-Z-]*( {3,}[A-Z][A-Z-]*)+$`)
	tableCell   = regexp.MustCompile(`\S(?: ?\S)*`)
)

// realign re-aligns tables (a header line of upper-case words, then rows
// of cells 3 or more spaces apart), so a placeholder of another width than the value
// it replaced does not shift the columns.
func realign(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); {
		if !tableHeader.MatchString(lines[i]) {
			out = append(out, lines[i])
			i++
			continue
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
		var rows [][]string
		j := i
		for ; j < len(lines) && (j == i || strings.Contains(strings.TrimSpace(lines[j]), "   ")); j++ {
			rows = append(rows, tableCell.FindAllString(lines[j], -1))
		}
		var widths []int
		for _, r := range rows {
			for k, c := range r {
				if k >= len(widths) {
					widths = append(widths, 0)
				}
				widths[k] = max(widths[k], len(c))
			}
		}
		for _, r := range rows {
			var b strings.Builder
			b.WriteString(indent)
			for c, cell := range r {
				b.WriteString(cell)
				if c < len(r)-1 {
					b.WriteString(strings.Repeat(" ", widths[c]-len(cell)+3))
				}
			}
			out = append(out, b.String())
		}
		i = j
	}
	return strings.Join(out, "\n")
}

// golden compares normalised output with testdata/<name>.golden, or
// rewrites it with -update.
func golden(t *testing.T, name, got, ns string) {
	t.Helper()
	got = normalise(got, ns)
	path := filepath.Join("testdata", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./test/cli -run %s -update to write it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("output differs from %s (go test ./test/cli -run %s -update rewrites it)\n--- want\n%s\n--- got\n%s", path, t.Name(), want, got)
	}
}
