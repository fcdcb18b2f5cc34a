// Package devenv tests `nodepool dev up` as a person runs it: the built
// binary as a subprocess on free ports, the samples of config/samples applied
// with a client, a clean stop on SIGINT and a resume on the same data dir;
// run from a directory outside the checkout, and killed with SIGKILL.
package devenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/capi"
	"nodepool.dev/nodepool/internal/k8sbin"

	// The test builds cmd/nodepool and runs it: importing what it is built
	// from makes go test's cache notice when any of it changes.
	_ "nodepool.dev/nodepool/internal/cli"
	_ "nodepool.dev/nodepool/internal/controller"
	_ "nodepool.dev/nodepool/internal/devenv"
	_ "nodepool.dev/nodepool/internal/payloadserver"
	_ "nodepool.dev/nodepool/internal/sim"
)

// The sample pools, as config/samples/workers.yaml and
// config/samples/inplace/edge.yaml name them.
var (
	samplePool  = client.ObjectKey{Namespace: "dev", Name: "workers"}
	inPlacePool = client.ObjectKey{Namespace: "dev", Name: "edge"}
)

func TestDevUpRunsTheSamplePoolAndResumesAfterAStop(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := k8sbin.Dir(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildNodepool(t, root)
	dataDir := filepath.Join(t.TempDir(), "data")
	ports := freePorts(t, 4)
	args := []string{"dev", "up", "--data-dir", dataDir, "--assets-dir", assets,
		"--apiserver-port", ports[0], "--etcd-port", ports[1], "--etcd-peer-port", ports[2], "--payload-server-port", ports[3],
		"--boot-delay", "0", "--status-interval", "1s"}

	first := startDevUp(t, root, bin, args)
	c := adminClient(t, dataDir)
	applySamples(t, c, filepath.Join(root, "config", "samples"))
	applySamples(t, c, filepath.Join(root, "config", "samples", "inplace"))
	before := waitForReadyPool(t, c, first, samplePool, 3)
	beforeInPlace := waitForReadyPool(t, c, first, inPlacePool, 2)
	// The release's admission policies are installed, and the controllers
	// run as the identities they name: the pools rolled out, and an
	// administrator's restart of a pool's MachineDeployment is refused.
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: samplePool.Namespace, Name: samplePool.Name}}
	restart := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rollout":{"after":"2020-01-01T00:00:00Z"}}}`))
	if err := c.Patch(context.Background(), md, restart); err == nil || !strings.Contains(err.Error(), "nodepool-owns-machinedeployments") {
		t.Errorf("an administrator's spec.rollout.after on the pool's MachineDeployment: %v, want refused by nodepool-owns-machinedeployments", err)
	}
	first.interrupt(t)

	second := startDevUp(t, root, bin, args)
	if !strings.Contains(second.output(), "resumed: 2 NodePools, 5 Machines") {
		t.Errorf("the second start does not say it resumed:\n%s", second.output())
	}
	c = adminClient(t, dataDir)
	after := waitForReadyPool(t, c, second, samplePool, 3)
	afterInPlace := waitForReadyPool(t, c, second, inPlacePool, 2)
	if !equal(before, after) || !equal(beforeInPlace, afterInPlace) {
		t.Errorf("the machines changed across the restart: before %v %v, after %v %v", before, beforeInPlace, after, afterInPlace)
	}
	second.interrupt(t)
}

// devUp is a running `nodepool dev up`.
type devUp struct {
	cmd     *exec.Cmd
	dataDir string
	mu      sync.Mutex
	out     strings.Builder
	done    chan error
}

func (d *devUp) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// startDevUp starts the binary and waits for its "ready" line.
func startDevUp(t *testing.T, dir, bin string, args []string) *devUp {
	t.Helper()
	return startDevUpWithEnv(t, dir, bin, args, nil)
}

// startDevUpWithEnv is startDevUp with the child's environment env (nil:
// the test's).
func startDevUpWithEnv(t *testing.T, dir, bin string, args, env []string) *devUp {
	t.Helper()
	d := &devUp{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	d.cmd.Dir = dir
	d.cmd.Env = env
	for i, a := range args {
		if a == "--data-dir" {
			d.dataDir = args[i+1]
		}
	}
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "ready ") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait(); _ = pw.Close() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	select {
	case <-ready:
		t.Logf("dev up is ready:\n%s", d.output())
		return d
	case err := <-d.done:
		d.done <- err
		t.Fatalf("dev up exited before it was ready (%v):\n%s\nthe end of nodepool.log:\n%s", err, d.output(), logTail(d.dataDir))
	case <-time.After(2 * time.Minute):
		t.Fatalf("dev up was not ready within 2 minutes:\n%s\nthe end of nodepool.log:\n%s", d.output(), logTail(d.dataDir))
	}
	return nil
}

// interrupt sends SIGINT, as Ctrl-C does, and expects a clean exit.
func (d *devUp) interrupt(t *testing.T) {
	t.Helper()
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("dev up did not stop cleanly after SIGINT (%v):\n%s", err, d.output())
		}
		took := time.Since(start)
		t.Logf("dev up stopped in %s", took.Round(100*time.Millisecond))
		if took > 10*time.Second {
			t.Logf("a slow stop; the end of nodepool.log:\n%s", logTail(d.dataDir))
		}
	case <-time.After(time.Minute):
		t.Fatalf("dev up did not stop within a minute of SIGINT:\n%s", d.output())
	}
	if !strings.Contains(d.output(), "stopped;") {
		t.Errorf("dev up did not say it stopped:\n%s", d.output())
	}
}

func adminClient(t *testing.T, dataDir string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{capi.AddToScheme, nodepoolv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// applySamples creates every object of every YAML file in dir, as
// `kubectl apply -f dir` does for new objects.
func applySamples(t *testing.T, c client.Client, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s: %v", dir, err)
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(context.Background(), u); err != nil {
				t.Fatalf("applying %s %s from %s: %v", u.GetKind(), u.GetName(), f, err)
			}
		}
		_ = r.Close()
	}
}

// waitForReadyPool waits until the sample pool is Ready with n machines
// whose Nodes are ready, and returns the machines' UIDs.
func waitForReadyPool(t *testing.T, c client.Client, d *devUp, key client.ObjectKey, n int) []types.UID {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		uids, state, ok := poolState(ctx, c, key, n)
		if ok {
			return uids
		}
		last = state
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the sample pool %s was not Ready with %d nodes within 90s; last: %s\ndev up said:\n%s", key, n, last, d.output())
	return nil
}

func poolState(ctx context.Context, c client.Client, key client.ObjectKey, n int) ([]types.UID, string, bool) {
	pool := &nodepoolv1.NodePool{}
	if err := c.Get(ctx, key, pool); err != nil {
		return nil, err.Error(), false
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(key.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: key.Name}); err != nil {
		return nil, err.Error(), false
	}
	var uids []types.UID
	ready := 0
	for _, m := range ms.Items {
		uids = append(uids, m.UID)
		node := &corev1.Node{}
		if !m.Status.NodeRef.IsDefined() || c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node) != nil {
			continue
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && node.Labels[nodepoolv1.LabelPayload] != "" {
				ready++
			}
		}
	}
	cond := meta.FindStatusCondition(pool.Status.Conditions, nodepoolv1.ConditionReady)
	state := fmt.Sprintf("%d machines, %d ready nodes with a payload label, Ready condition %+v", len(ms.Items), ready, cond)
	return uids, state, len(ms.Items) == n && ready == n && cond != nil && cond.Status == "True"
}

func equal(a, b []types.UID) bool {
	set := map[types.UID]bool{}
	for _, u := range a {
		set[u] = true
	}
	for _, u := range b {
		if !set[u] {
			return false
		}
	}
	return len(a) == len(b)
}

// freePorts returns n ports on loopback that were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

func logTail(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "nodepool.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
